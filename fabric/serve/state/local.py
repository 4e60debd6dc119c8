"""State shared by replicas on one host without a database server: SQLite files and file locks in one folder
(``FABRIC_STATE_URL=sqlite:///<folder>``; ``fabric serve --workers N`` gives its workers ``<home>/replicas``).

The same four pieces as the PostgreSQL backend (:mod:`fabric.serve.state.postgres`), with the same guarantees for
processes on one machine that see one file system with working POSIX locks (not NFS):

- **tasks** (``state.sqlite``: ``fabric_tasks``, ``fabric_idem``, ``fabric_bodies``, WAL, every commit synced):
  :class:`LocalTaskStore`. The tenant's *writer lock* is an exclusive ``flock`` on a file of its own, which the
  kernel drops when its holder dies (``kill -9`` included), as PostgreSQL drops a session advisory lock; the
  claim is one ``BEGIN IMMEDIATE`` transaction (only the lock's holder claims); a submission mutex is a
  ``flock`` too (one of :data:`SUBMIT_SLOTS` files per tenant, by the idempotency key's hash);
- **rate buckets** (``buckets.sqlite``, WAL, not synced: a crash may forget a refill, never a task):
  :class:`LocalBuckets`, one row per bucket read and written in one ``BEGIN IMMEDIATE`` transaction on the
  event loop (tens of microseconds; no thread hop per request);
- **the cursor secret** (``fabric_secrets`` in ``state.sqlite``), created once by the first replica;
- **API keys**: the home's own ``keys.sqlite`` (:class:`fabric.serve.keys.store.KeyStore` already opens a connection per
  call, so every process sees a key created or revoked by another or by the CLI).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

from fabric.core.errors import ConfigError
from fabric.core.filelock import FileLock
from fabric.core.logs import get_logger
from fabric.serve.state.base import task_tables
from fabric.serve.tasks.store import COLUMNS, IngestTask, TaskStatus, row_task, task_row

__all__ = ["LOCAL_SCHEME", "SUBMIT_SLOTS", "LocalBuckets", "LocalState", "LocalTaskStore", "local_folder", "local_url"]

log = get_logger(__name__)

LOCAL_SCHEME = "sqlite"
"""The ``FABRIC_STATE_URL`` scheme of this backend: ``sqlite:///<absolute folder>``."""

SCHEMA = task_tables(serial="INTEGER PRIMARY KEY AUTOINCREMENT", blob="BLOB")
"""Tables of ``state.sqlite`` (the PostgreSQL backend's, in SQLite's dialect)."""

_BUCKETS = (
    "CREATE TABLE IF NOT EXISTS fabric_buckets (name TEXT PRIMARY KEY, tokens REAL NOT NULL, stamp REAL NOT NULL)"
)

SUBMIT_SLOTS = 64
"""Submission lock files per tenant (:meth:`LocalTaskStore.lock_key`)."""

_SELECT = f"SELECT {COLUMNS} FROM fabric_tasks"
_SETS = ", ".join(f"{c.strip()} = ?" for c in COLUMNS.split(",")[1:])


def local_folder(url: str) -> Path | None:
    """The folder of a ``sqlite:///<folder>`` state URL; None for another scheme.

    Raises:
        ConfigError: a ``sqlite:`` URL without an absolute folder.
    """
    parts = urlsplit(url)
    if parts.scheme != LOCAL_SCHEME:
        return None
    path = unquote(parts.path)
    if parts.netloc or not path.startswith("/") or path == "/":
        raise ConfigError(
            f"FABRIC_STATE_URL: expected sqlite:///<absolute folder> (three slashes), got {url!r}",
            key="FABRIC_STATE_URL",
        )
    return Path(path)


def local_url(folder: Path) -> str:
    """The state URL of ``folder`` (absolute)."""
    return f"{LOCAL_SCHEME}://{folder.resolve()}"


def _digest(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:24]


class LocalState:
    """The shared folder of the replicas on this host: ``state.sqlite``, ``buckets.sqlite`` and ``locks/``.

    Args:
        folder: where the files live (created at :meth:`open_sync`).
    """

    errors: tuple[type[Exception], ...] = (sqlite3.Error,)
    """The database's errors (the task worker logs them, and an :class:`OSError`, and polls again)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.where = str(folder)
        """Where the state lives (for logs and errors)."""
        self.db = folder / "state.sqlite"
        self.locks = folder / "locks"

    def open_sync(self) -> None:
        """Create the folder and the tables (idempotent; replicas starting together take turns on the file).

        Raises:
            ConfigError: the folder cannot be created or the database written.
        """
        try:
            self.locks.mkdir(parents=True, exist_ok=True)
            with contextlib.closing(self.connect()) as conn:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"shared state folder {self.where} unusable: {exc}", key="FABRIC_STATE_URL") from None

    async def open(self) -> None:
        """:meth:`open_sync` in a worker thread."""
        await asyncio.to_thread(self.open_sync)

    async def aclose(self) -> None:
        """Nothing stays open between calls (each opens its own connection)."""

    def connect(self) -> sqlite3.Connection:
        """A new connection to ``state.sqlite`` in autocommit mode (transactions are explicit)."""
        conn = sqlite3.connect(self.db, timeout=30.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA synchronous=FULL")
        return conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A connection inside ``BEGIN IMMEDIATE`` (the write lock taken at once), committed on success."""
        conn = self.connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()

    def lock_path(self, kind: str, *names: str) -> Path:
        """The lock file of ``kind`` for ``names`` (hashed: tenant names and keys never reach the file system)."""
        return self.locks / f"{kind}-{_digest(*names)}.lock"

    def task_store(self, tenant: str, owner: str) -> LocalTaskStore:
        """``tenant``'s task queue, run under ``owner``'s name."""
        return LocalTaskStore(self, tenant, owner)

    def secret_sync(self, name: str) -> bytes:
        """The secret ``name``, created (random, 64 hex digits) by the first caller."""
        with self.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO fabric_secrets (name, value) VALUES (?, ?)", (name, secrets.token_hex(32))
            )
            row = conn.execute("SELECT value FROM fabric_secrets WHERE name = ?", (name,)).fetchone()
        return str(row[0]).encode("ascii")

    async def secret(self, name: str) -> bytes:
        """:meth:`secret_sync` in a worker thread."""
        return await asyncio.to_thread(self.secret_sync, name)


class LocalTaskStore:
    """Tenant ``tenant``'s tasks in ``state.sqlite`` (the interface of
    :class:`fabric.serve.tasks.postgres.SharedTaskStore`).

    Args:
        state: the replicas' folder.
        tenant: whose tasks.
        owner: this replica's name, recorded on the tasks it runs.
    """

    def __init__(self, state: LocalState, tenant: str, owner: str) -> None:
        self.state = state
        self.tenant = tenant
        self.owner = owner
        self._writer = FileLock(state.lock_path("writer", tenant))
        self._wlock = threading.Lock()

    # ------------------------------------------------------------------ the TaskStore interface

    def add(self, task: IngestTask, body: bytes | Path | None) -> None:
        """Record a new queued task, its idempotency key and (for entries) its spooled body, in one transaction (a
        body given as a file is read whole here, as the shared store does)."""
        if isinstance(body, Path):
            body = body.read_bytes()
        with self.state.transaction() as conn:
            conn.execute(f"INSERT INTO fabric_tasks ({COLUMNS}) VALUES ({', '.join('?' * 14)})", task_row(task))
            conn.execute(
                "INSERT INTO fabric_idem (tenant, key, task_id) VALUES (?, ?, ?) "
                "ON CONFLICT (tenant, key) DO UPDATE SET task_id = excluded.task_id",
                (task.tenant, task.key, task.id),
            )
            if body is not None:
                conn.execute(
                    "INSERT INTO fabric_bodies (tenant, source_path, body) VALUES (?, ?, ?) "
                    "ON CONFLICT (tenant, source_path) DO UPDATE SET body = excluded.body",
                    (task.tenant, str(task.source_path), body),
                )

    def save(self, task: IngestTask) -> None:
        """Write the task's current state, fenced as :meth:`fabric.serve.tasks.postgres.SharedTaskStore.save` is (only
        while unclaimed or claimed by this replica; a late save never reopens a finished record); once it
        finished, drop its body unless an unfinished task shares it."""
        row = task_row(task)
        with self.state.transaction() as conn:
            cur = conn.execute(
                f"UPDATE fabric_tasks SET {_SETS} WHERE id = ? AND (owner IS NULL OR owner = ?) "
                "AND (status IN ('queued', 'running') OR ?)",
                (*row[1:], row[0], self.owner, task.finished),
            )
            if task.finished and cur.rowcount:
                conn.execute(
                    "DELETE FROM fabric_bodies WHERE tenant = ? AND source_path = ? AND NOT EXISTS (SELECT 1 "
                    "FROM fabric_tasks t WHERE t.tenant = fabric_bodies.tenant "
                    "AND t.source_path = fabric_bodies.source_path AND t.status IN ('queued', 'running'))",
                    (self.tenant, str(task.source_path)),
                )

    def _read(self, sql: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
        with contextlib.closing(self.state.connect()) as conn:
            return conn.execute(sql, params).fetchall()

    def get(self, task_id: str) -> IngestTask | None:
        """The tenant's task with this id, if its record is kept."""
        rows = self._read(_SELECT + " WHERE id = ? AND tenant = ?", (task_id, self.tenant))
        return row_task(rows[0]) if rows else None

    def by_key(self, tenant: str, key: str) -> IngestTask | None:
        """The task holding an idempotency key."""
        rows = self._read(
            _SELECT + " WHERE id = (SELECT task_id FROM fabric_idem WHERE tenant = ? AND key = ?)", (tenant, key)
        )
        return row_task(rows[0]) if rows else None

    def unfinished(self) -> list[IngestTask]:
        """The tenant's queued and running tasks, in queue order."""
        rows = self._read(
            _SELECT + " WHERE tenant = ? AND status IN ('queued', 'running') ORDER BY seq", (self.tenant,)
        )
        return [row_task(r) for r in rows]

    def body(self, source_path: Path) -> bytes | None:
        """The spooled body written to ``source_path``, while an unfinished task needs it."""
        rows = self._read(
            "SELECT body FROM fabric_bodies WHERE tenant = ? AND source_path = ?", (self.tenant, str(source_path))
        )
        return bytes(rows[0][0]) if rows else None  # type: ignore[call-overload]

    def spooled(self) -> set[str]:
        """The spool files some unfinished task of the tenant still needs."""
        return {str(r[0]) for r in self._read("SELECT source_path FROM fabric_bodies WHERE tenant = ?", (self.tenant,))}

    def counts(self) -> dict[str, int]:
        """The tenant's kept task records by status."""
        out = {s.value: 0 for s in TaskStatus}
        rows = self._read("SELECT status, count(*) FROM fabric_tasks WHERE tenant = ? GROUP BY status", (self.tenant,))
        out.update({str(r[0]): int(r[1]) for r in rows})  # type: ignore[call-overload]
        return out

    def evict(self, keep: int) -> int:
        """Drop the tenant's oldest finished records beyond ``keep`` (and their keys)."""
        with self.state.transaction() as conn:
            old = [
                str(r[0])
                for r in conn.execute(
                    "SELECT id FROM fabric_tasks WHERE tenant = ? AND status IN ('succeeded', 'failed') "
                    "ORDER BY finished_at DESC, seq DESC LIMIT -1 OFFSET ?",
                    (self.tenant, keep),
                )
            ]
            for start in range(0, len(old), 500):
                part = old[start : start + 500]
                marks = ", ".join("?" * len(part))
                conn.execute(f"DELETE FROM fabric_idem WHERE task_id IN ({marks})", part)
                conn.execute(f"DELETE FROM fabric_tasks WHERE id IN ({marks})", part)
        return len(old)

    def close(self) -> None:
        """Release the writer lock."""
        self.release_writer()

    # ------------------------------------------------------------------ replicas

    def try_writer(self) -> bool:
        """Take the tenant's writer lock without waiting; True when taken (False when held elsewhere, or already
        held here: not re-entrant, as the PostgreSQL lock)."""
        with self._wlock:
            if self._writer.fd is not None:
                return False
            return self._writer.take(wait=False)

    def writer_alive(self) -> bool:
        """Whether the writer lock is held (a held ``flock`` cannot be lost while the process lives)."""
        with self._wlock:
            return self._writer.fd is not None

    def release_writer(self) -> None:
        """Drop the writer lock."""
        with self._wlock:
            self._writer.release()

    def claim(self) -> IngestTask | None:
        """The oldest unfinished task, marked as this replica's (hold the writer lock first); a task found
        ``running`` is returned as recorded (its runner died), so the caller repairs first."""
        with self.state.transaction() as conn:
            row = conn.execute(
                _SELECT + " WHERE tenant = ? AND status IN ('queued', 'running') ORDER BY seq LIMIT 1", (self.tenant,)
            ).fetchone()
            if row is None:
                return None
            conn.execute("UPDATE fabric_tasks SET owner = ? WHERE id = ?", (self.owner, row[0]))
        return row_task(row)

    def lock_key(self, key: str) -> FileLock:
        """Wait for the submission mutex of idempotency key ``key``; the lock to hand back to :meth:`unlock_key`.

        Keys share :data:`SUBMIT_SLOTS` lock files per tenant (a file per key would pile up, one per submission
        ever made, and deleting a lock file others may be waiting on is not safe); two keys in one slot only take
        turns."""
        slot = int(_digest(self.tenant, key), 16) % SUBMIT_SLOTS
        lock = FileLock(self.state.lock_path("submit", self.tenant, str(slot)))
        lock.take(wait=True)
        return lock

    def unlock_key(self, lock: FileLock, key: str) -> None:
        """Release the mutex taken by :meth:`lock_key`."""
        lock.release()


class LocalBuckets:
    """Token buckets in ``buckets.sqlite`` under the replicas' folder (:class:`fabric.serve.limits.tenants.TenantLimits`
    takes
    from them), so a tenant's ``rate`` is its total over the replicas on this host.

    Each take is one short transaction on the event loop's own connection. Time is this host's wall clock
    (the replicas share it). A take that cannot get the file's write lock within ``timeout_s`` (a replica stopped
    inside a transaction) grants the request and logs ``rate_bucket_unavailable``: the rate is a fairness limit,
    and refusing every tenant because one process hangs would be worse.
    """

    def __init__(self, folder: Path, *, clock: Callable[[], float] = time.time, timeout_s: float = 0.25) -> None:
        self.path = folder / "buckets.sqlite"
        self.timeout_s = timeout_s
        self._clock = clock
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=OFF")
            conn.execute(_BUCKETS)
            self._conn = conn
        return self._conn

    def take_sync(self, name: str, rate: float, burst: int) -> float:
        """Take one token of bucket ``name``: 0.0 when granted, else the seconds until one is available."""
        conn: sqlite3.Connection | None = None
        try:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute("SELECT tokens, stamp FROM fabric_buckets WHERE name = ?", (name,)).fetchone()
            now = self._clock()
            have, stamp = (float(row[0]), float(row[1])) if row else (float(burst), now)
            now = max(now, stamp)
            have = min(float(burst), have + (now - stamp) * rate)
            wait = 0.0 if have >= 1.0 else (1.0 - have) / rate
            conn.execute(
                "INSERT INTO fabric_buckets (name, tokens, stamp) VALUES (?, ?, ?) "
                "ON CONFLICT (name) DO UPDATE SET tokens = excluded.tokens, stamp = excluded.stamp",
                (name, have - 1.0 if wait == 0.0 else have, now),
            )
            conn.execute("COMMIT")
            return wait
        except sqlite3.Error as exc:
            if conn is not None and conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            log.warning("rate_bucket_unavailable", path=str(self.path), error=str(exc))
            return 0.0

    async def take(self, name: str, rate: float, burst: int) -> float:
        """:meth:`take_sync` (on the loop: a thread hop would cost more than the transaction)."""
        return self.take_sync(name, rate, burst)

    def close(self) -> None:
        """Close the connection."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
