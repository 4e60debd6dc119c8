"""One tenant's ingestion tasks in the shared database: the interface of :class:`fabric.serve.tasks.store.TaskStore`
over ``fabric_tasks``, ``fabric_idem`` and ``fabric_bodies``, plus what replicas need to share one queue.

- **The tenant's writer lock** (:meth:`SharedTaskStore.try_writer`): a session advisory lock on a connection of
  its own. Only its holder runs the tenant's tasks and repairs the tenant's stores; the database drops it when the
  holder's connection ends (process killed, host gone: keepalives), so another replica takes over. Holding it,
  a task still marked ``running`` is one whose runner died: it is resumed (after the stores are repaired).
- **The claim** (:meth:`SharedTaskStore.claim`): the oldest unfinished task, ``SELECT … FOR UPDATE SKIP LOCKED``,
  marked ``running`` by this replica in the same transaction, so it runs exactly once at a time.
- **Submission mutex** (:meth:`SharedTaskStore.lock_key`): a session advisory lock per idempotency key, so two
  replicas given the same key at once create one task.

Blocking methods: :mod:`fabric.serve.tasks.shared` calls them from worker threads.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
from psycopg_pool import ConnectionPool

from fabric.serve.tasks.store import COLUMNS, IngestTask, TaskStatus, row_task, task_row

if TYPE_CHECKING:
    from fabric.serve.state.postgres import SharedState

__all__ = ["SharedTaskStore"]

_WRITER_CLASS = 0x0FAB
"""First half of the writer lock's key (the second is the tenant's hash)."""
_KEY_CLASS = 0x0FAC
"""First half of an idempotency key's submission mutex."""

_SELECT = f"SELECT {COLUMNS} FROM fabric_tasks".encode()
_SETS = ", ".join(f"{c.strip()} = %s" for c in COLUMNS.split(",")[1:])


class SharedTaskStore:
    """Tenant ``tenant``'s tasks in the shared database (a :class:`~fabric.serve.tasks.store.TaskStore` stand-in).

    Args:
        state: the replica's pools.
        tenant: whose tasks.
        owner: this replica's name, recorded on the tasks it runs.
    """

    def __init__(self, state: SharedState, tenant: str, owner: str) -> None:
        self.state = state
        self.pool: ConnectionPool = state.sync
        self.tenant = tenant
        self.owner = owner
        self._lockconn: psycopg.Connection[tuple[object, ...]] | None = None
        self._held = False
        self._wlock = threading.Lock()

    # ------------------------------------------------------------------ the TaskStore interface

    def add(self, task: IngestTask, body: bytes | Path | None) -> None:
        """Record a new queued task, its idempotency key and (for entries) its spooled body, in one transaction (a
        ``bytea`` value: a body given as a file is read whole here)."""
        if isinstance(body, Path):
            body = body.read_bytes()
        with self.pool.connection() as conn, conn.transaction():
            conn.execute(
                f"INSERT INTO fabric_tasks ({COLUMNS}) VALUES ({', '.join(['%s'] * 14)})".encode(), task_row(task)
            )
            conn.execute(
                "INSERT INTO fabric_idem (tenant, key, task_id) VALUES (%s, %s, %s) "
                "ON CONFLICT (tenant, key) DO UPDATE SET task_id = EXCLUDED.task_id",
                (task.tenant, task.key, task.id),
            )
            if body is not None:
                conn.execute(
                    "INSERT INTO fabric_bodies (tenant, source_path, body) VALUES (%s, %s, %s) "
                    "ON CONFLICT (tenant, source_path) DO UPDATE SET body = EXCLUDED.body",
                    (task.tenant, str(task.source_path), body),
                )

    def save(self, task: IngestTask) -> None:
        """Write the task's current state; once it finished, drop its body unless an unfinished task shares it.

        Only while the task is unclaimed or claimed by this replica: a replica that lost its writer lock, and
        whose task another replica took over, cannot overwrite the new runner's record (its owner is the fence);
        and a late progress save never turns a finished record back into a running one.
        """
        row = task_row(task)
        with self.pool.connection() as conn, conn.transaction():
            cur = conn.execute(
                f"UPDATE fabric_tasks SET {_SETS} WHERE id = %s AND (owner IS NULL OR owner = %s) "
                "AND (status IN ('queued', 'running') OR %s)".encode(),
                (*row[1:], row[0], self.owner, task.finished),
            )
            if task.finished and cur.rowcount:
                conn.execute(
                    "DELETE FROM fabric_bodies b WHERE tenant = %s AND source_path = %s AND NOT EXISTS (SELECT 1 "
                    "FROM fabric_tasks t WHERE t.tenant = b.tenant AND t.source_path = b.source_path "
                    "AND t.status IN ('queued', 'running'))",
                    (self.tenant, str(task.source_path)),
                )

    def get(self, task_id: str) -> IngestTask | None:
        """The tenant's task with this id, if its record is kept."""
        with self.pool.connection() as conn:
            row = conn.execute(_SELECT + b" WHERE id = %s AND tenant = %s", (task_id, self.tenant)).fetchone()
        return row_task(row) if row else None

    def by_key(self, tenant: str, key: str) -> IngestTask | None:
        """The task holding an idempotency key."""
        with self.pool.connection() as conn:
            row = conn.execute(
                _SELECT + b" WHERE id = (SELECT task_id FROM fabric_idem WHERE tenant = %s AND key = %s)", (tenant, key)
            ).fetchone()
        return row_task(row) if row else None

    def unfinished(self) -> list[IngestTask]:
        """The tenant's queued and running tasks, in queue order."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                _SELECT + b" WHERE tenant = %s AND status IN ('queued', 'running') ORDER BY seq", (self.tenant,)
            ).fetchall()
        return [row_task(r) for r in rows]

    def body(self, source_path: Path) -> bytes | None:
        """The spooled body written to ``source_path``, while an unfinished task needs it."""
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT body FROM fabric_bodies WHERE tenant = %s AND source_path = %s", (self.tenant, str(source_path))
            ).fetchone()
        return bytes(row[0]) if row else None

    def spooled(self) -> set[str]:
        """The spool files some unfinished task of the tenant still needs."""
        with self.pool.connection() as conn:
            rows = conn.execute("SELECT source_path FROM fabric_bodies WHERE tenant = %s", (self.tenant,)).fetchall()
        return {str(r[0]) for r in rows}

    def counts(self) -> dict[str, int]:
        """The tenant's kept task records by status."""
        out = {s.value: 0 for s in TaskStatus}
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT status, count(*) FROM fabric_tasks WHERE tenant = %s GROUP BY status", (self.tenant,)
            ).fetchall()
        out.update({str(r[0]): int(r[1]) for r in rows})
        return out

    def evict(self, keep: int) -> int:
        """Drop the tenant's oldest finished records beyond ``keep`` (and their keys)."""
        with self.pool.connection() as conn, conn.transaction():
            rows = conn.execute(
                "SELECT id FROM fabric_tasks WHERE tenant = %s AND status IN ('succeeded', 'failed') "
                "ORDER BY finished_at DESC, seq DESC OFFSET %s",
                (self.tenant, keep),
            ).fetchall()
            old = [str(r[0]) for r in rows]
            if old:
                conn.execute("DELETE FROM fabric_idem WHERE task_id = ANY(%s)", (old,))
                conn.execute("DELETE FROM fabric_tasks WHERE id = ANY(%s)", (old,))
        return len(old)

    def close(self) -> None:
        """Release the writer lock and close its connection (the pools belong to the replica)."""
        self.release_writer()
        with self._wlock:
            conn, self._lockconn = self._lockconn, None
        if conn is not None:
            conn.close()

    # ------------------------------------------------------------------ replicas

    def try_writer(self) -> bool:
        """Take the tenant's writer lock without waiting; True when taken (False when held elsewhere, or already
        held here: it is not re-entrant, so two holders in one process cannot both think they own it).

        The lock lives on a connection of its own, kept between takes; a broken one is replaced.
        """
        with self._wlock:
            if self._held:
                return False
            if self._lockconn is None or self._lockconn.closed or self._lockconn.broken:
                self._lockconn = self.state.connect()
            row = self._lockconn.execute(
                "SELECT pg_try_advisory_lock(%s, hashtext(%s))", (_WRITER_CLASS, self.tenant)
            ).fetchone()
            self._held = bool(row and row[0])
            return self._held

    def writer_alive(self) -> bool:
        """Whether the writer lock is held and its connection still answers."""
        with self._wlock:
            if not self._held or self._lockconn is None:
                return False
            try:
                self._lockconn.execute("SELECT 1")
            except psycopg.Error:
                self._held = False
                return False
            return True

    def release_writer(self) -> None:
        """Drop the writer lock (the connection stays for the next take)."""
        with self._wlock:
            if not self._held or self._lockconn is None:
                return
            self._held = False
            try:
                self._lockconn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (_WRITER_CLASS, self.tenant))
            except psycopg.Error:
                self._lockconn.close()  # closing the session drops its locks

    def claim(self) -> IngestTask | None:
        """The oldest unfinished task, marked running by this replica (hold the writer lock first).

        A task found ``running`` is returned as it was recorded (its runner died), so the caller can tell and
        repair first; a queued one is returned already marked ``running`` under this replica's name.
        """
        with self.pool.connection() as conn, conn.transaction():
            row = conn.execute(
                _SELECT + b" WHERE tenant = %s AND status IN ('queued', 'running') "
                b"ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED",
                (self.tenant,),
            ).fetchone()
            if row is None:
                return None
            conn.execute("UPDATE fabric_tasks SET owner = %s WHERE id = %s", (self.owner, row[0]))
        return row_task(row)

    def lock_key(self, key: str) -> psycopg.Connection[tuple[object, ...]]:
        """Wait for the submission mutex of idempotency key ``key``; the connection holding it."""
        conn = self.pool.getconn()
        conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (_KEY_CLASS, f"{self.tenant}\n{key}"))
        return conn

    def unlock_key(self, conn: psycopg.Connection[tuple[object, ...]], key: str) -> None:
        """Release the mutex taken by :meth:`lock_key`."""
        try:
            conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (_KEY_CLASS, f"{self.tenant}\n{key}"))
        finally:
            self.pool.putconn(conn)
