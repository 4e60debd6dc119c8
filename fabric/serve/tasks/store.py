"""The durable record of ingestion tasks: ``<home>/tasks.sqlite`` holds every task, its place in the queue, its
idempotency key and, until it finishes, its spooled body; :mod:`fabric.serve.tasks.queue` runs them.

Tables (this module owns them; other modules keep their own tables in their own files):

- ``tasks``: one row per task, ``seq`` is the queue order; ``tenant`` (``default`` for the single-tenant
  service), the idempotency ``key``, the submission (JSON, without entries), the file the pipeline reads, status,
  ``attempts`` (how many times a run started), timestamps, progress, report, error and id conflicts (JSON);
- ``idem``: ``(tenant, key) → task id``;
- ``bodies``: the spooled JSONL of an entry list, keyed by its spool file, deleted once no unfinished task needs
  it. The spool file is a copy the loader reads; after a crash it is written again from here.

A task and its body and key are committed in one transaction, so a crash leaves either the whole submission or
none of it. Writes are small and run in worker threads (:func:`asyncio.to_thread`); one lock serialises the
connection.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from fabric.serve.tasks.submission import Submission

__all__ = [
    "COLUMNS",
    "DEFAULT_TENANT",
    "STAGES",
    "TASKS_FILE",
    "IngestTask",
    "StageProgress",
    "TaskBackend",
    "TaskStatus",
    "TaskStore",
    "row_task",
    "task_row",
]

TASKS_FILE = "tasks.sqlite"
"""The task store's file name under a home."""

DEFAULT_TENANT = "default"
"""The tenant of the embedded CLI and of a service without tenants."""

STAGES = ("load", "chunk", "embed", "write")
"""Pipeline stages whose progress a task reports."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant TEXT NOT NULL DEFAULT 'default',
    key TEXT NOT NULL,
    submission TEXT NOT NULL,
    source_path TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT,
    progress TEXT NOT NULL,
    report TEXT,
    error TEXT,
    conflicts TEXT
);
CREATE INDEX IF NOT EXISTS tasks_status ON tasks(status, seq);
CREATE TABLE IF NOT EXISTS idem (
    tenant TEXT NOT NULL, key TEXT NOT NULL, task_id TEXT NOT NULL, PRIMARY KEY (tenant, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS bodies (source_path TEXT PRIMARY KEY, body BLOB NOT NULL);
"""

COLUMNS = (
    "id, tenant, key, submission, source_path, status, attempts, created_at, started_at, finished_at, progress, "
    "report, error, conflicts"
)
"""Columns of a task row, in order."""


class TaskStatus(StrEnum):
    """Life cycle of a task."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


@dataclass(slots=True)
class StageProgress:
    """Units done out of the stage's total (0/0 until the stage starts; a stage with no work stays 0/0)."""

    done: int = 0
    total: int = 0


def _ts(t: datetime | None) -> str | None:
    return t.isoformat().replace("+00:00", "Z") if t is not None else None


def _parse_ts(raw: str | None) -> datetime | None:
    return datetime.fromisoformat(raw.replace("Z", "+00:00")) if raw else None


@dataclass(slots=True, kw_only=True)
class IngestTask:
    """One ingestion task and its record."""

    id: str
    """Random hex id, the handle of ``GET /v1/ingest/<id>``."""
    key: str
    """Idempotency key: ``key:<header>`` or ``sha256:<body hash>``."""
    submission: Submission
    """What to ingest (without its entries: they are in the spool file)."""
    source_path: Path
    """What the pipeline reads (the spool file for entries)."""
    tenant: str = DEFAULT_TENANT
    status: TaskStatus = TaskStatus.QUEUED
    attempts: int = 0
    """How many times a run of this task started (a restart after a crash resumes it)."""
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    started_at: datetime | None = None
    finished_at: datetime | None = None
    progress: dict[str, StageProgress] = field(default_factory=lambda: {s: StageProgress() for s in STAGES})
    """Per-stage progress, updated by the pipeline as it goes."""
    report: dict[str, Any] | None = None
    """``IngestReport.to_dict()`` (the ``fabric ingest --json`` summary) once the pipeline finished."""
    error: str | None = None
    """Why the task failed."""
    conflicts: dict[str, str] | None = None
    """Ids another source already holds, with that source, when the task failed on them (HTTP 409)."""
    done: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the task has finished (either way)."""

    @property
    def finished(self) -> bool:
        """Whether the task succeeded or failed."""
        return self.status in (TaskStatus.SUCCEEDED, TaskStatus.FAILED)

    def to_dict(self) -> dict[str, Any]:
        """The JSON record answered by the API."""
        sub = self.submission
        return {
            "task_id": self.id,
            "status": self.status.value,
            "status_url": f"/v1/ingest/{self.id}",
            "source": {
                "kind": sub.kind,
                "entries": sub.count if sub.kind == "entries" else None,
                "path": sub.requested_path or None,
                "format": sub.fmt,
                **({"include": list(sub.include)} if sub.include is not None else {}),
                **({"exclude": list(sub.exclude)} if sub.exclude is not None else {}),
            },
            "idempotency": "key" if self.key.startswith("key:") else "content",
            "attempts": self.attempts,
            "created_at": _ts(self.created_at),
            "started_at": _ts(self.started_at),
            "finished_at": _ts(self.finished_at),
            "progress": {name: {"done": p.done, "total": p.total} for name, p in self.progress.items()},
            "report": self.report,
            "error": self.error,
            **({"conflicts": self.conflicts} if self.conflicts else {}),
        }


def task_row(task: IngestTask) -> tuple[Any, ...]:
    """The task as the 14 values of :data:`COLUMNS` (the SQLite and PostgreSQL stores share it)."""
    sub = task.submission
    submission = {
        "kind": sub.kind, "fingerprint": sub.fingerprint, "count": sub.count,
        "path": str(sub.path) if sub.path is not None else None, "requested_path": sub.requested_path,
        "fmt": sub.fmt, "force_async": sub.force_async, "tenant": sub.tenant, "key_id": sub.key_id, "role": sub.role,
        "include": sub.include, "exclude": sub.exclude,
    }  # fmt: skip
    progress = {k: [p.done, p.total] for k, p in task.progress.items()}
    return (
        task.id, task.tenant, task.key, json.dumps(submission), str(task.source_path), task.status.value,
        task.attempts, _ts(task.created_at), _ts(task.started_at), _ts(task.finished_at), json.dumps(progress),
        json.dumps(task.report) if task.report is not None else None, task.error,
        json.dumps(task.conflicts) if task.conflicts else None,
    )  # fmt: skip


def _role(s: dict[str, Any]) -> str:
    """The submitter's role of a stored submission; a record from before roles were kept: a path (admin only) or no
    key id (open mode, the local operator) is ``admin``, any other key ``writer`` (least privilege)."""
    return str(s.get("role") or ("admin" if s["kind"] == "path" or s.get("key_id") is None else "writer"))


def _copy_into_blob(conn: sqlite3.Connection, source_path: str, body: Path) -> None:
    """Write the file ``body`` as the ``bodies`` row of ``source_path`` 256 KiB at a time (in the caller's
    transaction)."""
    size = body.stat().st_size
    cur = conn.execute("INSERT OR REPLACE INTO bodies (source_path, body) VALUES (?, zeroblob(?))", (source_path, size))
    assert cur.lastrowid is not None
    with body.open("rb") as fh, conn.blobopen("bodies", "body", cur.lastrowid) as blob:
        while piece := fh.read(1 << 18):
            blob.write(piece)


def row_task(row: tuple[Any, ...]) -> IngestTask:
    """The task of a row of :data:`COLUMNS`."""
    tid, tenant, key, sub_json, source, status, attempts, created, started, finished, prog, report, error, conf = row
    s = json.loads(sub_json)
    sub = Submission(
        kind=s["kind"], fingerprint=s["fingerprint"], count=s["count"],
        path=Path(s["path"]) if s["path"] else None, requested_path=s["requested_path"], fmt=s["fmt"],
        force_async=s["force_async"], tenant=s.get("tenant", tenant), key_id=s.get("key_id"), role=_role(s),
        **{k: tuple(s[k]) for k in ("include", "exclude") if s.get(k) is not None},
    )  # fmt: skip
    task = IngestTask(
        id=tid, key=key, submission=sub, source_path=Path(source), tenant=tenant, status=TaskStatus(status),
        attempts=attempts, created_at=_parse_ts(created) or datetime.now(UTC), started_at=_parse_ts(started),
        finished_at=_parse_ts(finished),
        progress={k: StageProgress(done=v[0], total=v[1]) for k, v in json.loads(prog).items()},
        report=json.loads(report) if report else None, error=error, conflicts=json.loads(conf) if conf else None,
    )  # fmt: skip
    if task.finished:
        task.done.set()
    return task


class TaskBackend(Protocol):
    """What :class:`fabric.serve.tasks.queue.IngestTasks` needs of a task store: :class:`TaskStore` (embedded) or
    :class:`fabric.serve.tasks.postgres.SharedTaskStore` (PostgreSQL, shared by replicas). Methods block."""

    def add(self, task: IngestTask, body: bytes | Path | None) -> None: ...
    def save(self, task: IngestTask) -> None: ...
    def get(self, task_id: str) -> IngestTask | None: ...
    def by_key(self, tenant: str, key: str) -> IngestTask | None: ...
    def unfinished(self) -> list[IngestTask]: ...
    def body(self, source_path: Path) -> bytes | None: ...
    def spooled(self) -> set[str]: ...
    def counts(self) -> dict[str, int]: ...
    def evict(self, keep: int) -> int: ...
    def close(self) -> None: ...


class TaskStore:
    """Synchronous access to ``tasks.sqlite`` (call it from worker threads; one lock serialises the connection).

    Args:
        path: the database file (its folder is created).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.conn = sqlite3.connect(path, timeout=30.0, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.executescript(_SCHEMA)
        # lookups from the event loop read through their own connection: WAL lets them proceed while a large
        # body is being written through the other one
        self._rlock = threading.Lock()
        self._reader = sqlite3.connect(path, timeout=30.0, check_same_thread=False)

    def add(self, task: IngestTask, body: bytes | Path | None) -> None:
        """Record a new queued task, its idempotency key and (for entries) its spooled body, in one transaction; a
        body given as a file is copied in pieces (:func:`_copy_into_blob`), never read whole."""
        with self._lock, self.conn:
            self.conn.execute(f"INSERT INTO tasks ({COLUMNS}) VALUES ({', '.join('?' * 14)})", task_row(task))
            self.conn.execute(
                "INSERT OR REPLACE INTO idem (tenant, key, task_id) VALUES (?, ?, ?)", (task.tenant, task.key, task.id)
            )
            if isinstance(body, Path):
                _copy_into_blob(self.conn, str(task.source_path), body)
            elif body is not None:
                self.conn.execute(
                    "INSERT OR REPLACE INTO bodies (source_path, body) VALUES (?, ?)", (str(task.source_path), body)
                )

    def save(self, task: IngestTask) -> None:
        """Write the task's current state; once it finished, drop its body unless an unfinished task shares it."""
        row = task_row(task)
        with self._lock, self.conn:
            sets = ", ".join(f"{c.strip()} = ?" for c in COLUMNS.split(",")[1:])
            self.conn.execute(f"UPDATE tasks SET {sets} WHERE id = ?", (*row[1:], row[0]))
            if task.finished:
                self.conn.execute(
                    "DELETE FROM bodies WHERE source_path = ? AND NOT EXISTS (SELECT 1 FROM tasks "
                    "WHERE source_path = ? AND status IN ('queued', 'running'))",
                    (str(task.source_path), str(task.source_path)),
                )

    def get(self, task_id: str) -> IngestTask | None:
        """The task with this id, if its record is kept."""
        with self._rlock:
            row = self._reader.execute(f"SELECT {COLUMNS} FROM tasks WHERE id = ?", (task_id,)).fetchone()
        return row_task(row) if row else None

    def by_key(self, tenant: str, key: str) -> IngestTask | None:
        """The task holding an idempotency key."""
        with self._lock:
            row = self.conn.execute(
                f"SELECT {COLUMNS} FROM tasks WHERE id = (SELECT task_id FROM idem WHERE tenant = ? AND key = ?)",
                (tenant, key),
            ).fetchone()
        return row_task(row) if row else None

    def unfinished(self) -> list[IngestTask]:
        """Queued and running tasks, in queue order."""
        with self._lock:
            rows = self.conn.execute(
                f"SELECT {COLUMNS} FROM tasks WHERE status IN ('queued', 'running') ORDER BY seq"
            ).fetchall()
        return [row_task(r) for r in rows]

    def body(self, source_path: Path) -> bytes | None:
        """The spooled body written to ``source_path``, while an unfinished task needs it."""
        with self._lock:
            row = self.conn.execute("SELECT body FROM bodies WHERE source_path = ?", (str(source_path),)).fetchone()
        return bytes(row[0]) if row else None

    def spooled(self) -> set[str]:
        """The spool files some unfinished task still needs."""
        with self._lock:
            return {r[0] for r in self.conn.execute("SELECT source_path FROM bodies")}

    def counts(self) -> dict[str, int]:
        """Kept task records by status."""
        out = {s.value: 0 for s in TaskStatus}
        with self._rlock:
            out.update(dict(self._reader.execute("SELECT status, count(*) FROM tasks GROUP BY status").fetchall()))
        return out

    def evict(self, keep: int) -> int:
        """Drop the oldest finished records beyond ``keep`` (and their keys); unfinished ones are never dropped."""
        with self._lock, self.conn:
            old = [
                r[0]
                for r in self.conn.execute(
                    "SELECT id FROM tasks WHERE status IN ('succeeded', 'failed') ORDER BY finished_at DESC, seq DESC "
                    "LIMIT -1 OFFSET ?",
                    (keep,),
                )
            ]
            self._delete(old)
        return len(old)

    def _delete(self, ids: Iterable[str]) -> None:
        rows = [(i,) for i in ids]
        self.conn.executemany("DELETE FROM idem WHERE task_id = ?", rows)
        self.conn.executemany("DELETE FROM tasks WHERE id = ?", rows)

    def close(self) -> None:
        """Close the connection."""
        with self._lock, self._rlock:
            self.conn.close()
            self._reader.close()
