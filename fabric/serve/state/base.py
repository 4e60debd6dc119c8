"""What the replicas' shared state offers, whichever backend keeps it: PostgreSQL (:mod:`fabric.serve.state.postgres`,
replicas on several hosts) or SQLite files and file locks in one folder (:mod:`fabric.serve.state.local`, replicas on
one host, ``fabric serve --workers N``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from fabric.serve.tasks.shared import ReplicaTaskStore


__all__ = ["ReplicaState", "task_tables"]


def task_tables(*, serial: str, blob: str) -> str:
    """The tables both backends keep, in a dialect: ``serial`` is the queue order's column type (an
    auto-incrementing primary key), ``blob`` a binary column's type. Tasks with their idempotency keys and spooled
    bodies, and the cursor secrets."""
    return _TASK_TABLES.format(serial=serial, blob=blob)


_TASK_TABLES = """
CREATE TABLE IF NOT EXISTS fabric_tasks (
    seq {serial},
    id TEXT NOT NULL UNIQUE,
    tenant TEXT NOT NULL,
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
    conflicts TEXT,
    owner TEXT
);
CREATE INDEX IF NOT EXISTS fabric_tasks_queue ON fabric_tasks (tenant, status, seq);
CREATE TABLE IF NOT EXISTS fabric_idem (
    tenant TEXT NOT NULL, key TEXT NOT NULL, task_id TEXT NOT NULL, PRIMARY KEY (tenant, key)
);
CREATE TABLE IF NOT EXISTS fabric_bodies (
    tenant TEXT NOT NULL, source_path TEXT NOT NULL, body {blob} NOT NULL, PRIMARY KEY (tenant, source_path)
);
CREATE TABLE IF NOT EXISTS fabric_secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class ReplicaState(Protocol):
    """The replicas' shared state as the service uses it."""

    errors: tuple[type[Exception], ...]
    where: str

    def open_sync(self) -> None: ...
    async def open(self) -> None: ...
    async def aclose(self) -> None: ...
    def task_store(self, tenant: str, owner: str) -> ReplicaTaskStore: ...
    async def secret(self, name: str) -> bytes: ...
