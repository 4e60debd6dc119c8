"""The PostgreSQL database that replicas of ``fabric serve`` share (``FABRIC_STATE_URL``): its schema and pools.

Why PostgreSQL: the task queue must survive a replica's death and hand a task to exactly one replica, which a
durable, transactional store with row and advisory locks does (``SELECT … FOR UPDATE SKIP LOCKED``, session
advisory locks that the server drops when the holder's connection ends); one store then holds all four pieces of
shared state (tasks with their idempotency keys and spooled bodies, API keys, rate buckets, the cursor secret),
each update one transaction. Redis would lose acknowledged tasks without an append-only file and has no
transactions spanning a task, its key and its body; process memory is not shared at all.

Two pools per replica: a synchronous one for the task store and the key store (the ingestion worker already
calls its store from worker threads, :mod:`fabric.serve.tasks.queue`), and an asynchronous one for the per-request
rate buckets, so the hot path never waits for a thread. Connections use TCP keepalives, so the server notices a
replica that vanished (host down, cable cut) within about 30 s and releases its locks; a killed process closes
its sockets and releases them at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from fabric.core.errors import ConfigError
from fabric.serve.state.base import task_tables

if TYPE_CHECKING:
    from fabric.serve.tasks.postgres import SharedTaskStore

__all__ = ["KEEPALIVES", "SCHEMA", "STATE_URL_ENV", "SharedState", "check_state_url", "ensure_schema"]

STATE_URL_ENV = "FABRIC_STATE_URL"
"""The environment variable naming the shared database (it may hold a password: never put it in TOML)."""

KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 4}
"""libpq keepalive settings of every connection (a vanished peer is noticed within ~30 s)."""

_SCHEMA_LOCK = 0x0FAB0001
"""Advisory lock serialising the schema creation of replicas starting together."""

SCHEMA = (
    task_tables(serial="BIGSERIAL PRIMARY KEY", blob="BYTEA")
    + """
CREATE TABLE IF NOT EXISTS fabric_api_keys (
    key_id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    role TEXT NOT NULL,
    key_hash TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
CREATE TABLE IF NOT EXISTS fabric_buckets (
    name TEXT PRIMARY KEY, tokens DOUBLE PRECISION NOT NULL, stamp DOUBLE PRECISION NOT NULL
);
-- one token of bucket p_name: the tokens left (>= 0) when granted, else minus the seconds until one is there
CREATE OR REPLACE FUNCTION fabric_take_token(p_name TEXT, p_rate DOUBLE PRECISION, p_burst DOUBLE PRECISION)
RETURNS DOUBLE PRECISION LANGUAGE plpgsql AS $$
DECLARE
    now_s DOUBLE PRECISION;
    have DOUBLE PRECISION;
    old_stamp DOUBLE PRECISION;
BEGIN
    INSERT INTO fabric_buckets (name, tokens, stamp)
        VALUES (p_name, p_burst, extract(epoch FROM clock_timestamp())) ON CONFLICT (name) DO NOTHING;
    SELECT tokens, stamp INTO have, old_stamp FROM fabric_buckets WHERE name = p_name FOR UPDATE;
    now_s := GREATEST(old_stamp, extract(epoch FROM clock_timestamp()));
    have := LEAST(p_burst, have + (now_s - old_stamp) * p_rate);
    IF have >= 1 THEN
        UPDATE fabric_buckets SET tokens = have - 1, stamp = now_s WHERE name = p_name;
        RETURN have - 1;
    END IF;
    UPDATE fabric_buckets SET tokens = have, stamp = now_s WHERE name = p_name;
    RETURN -((1 - have) / p_rate);
END $$;
"""
)
"""Tables of the shared state (all prefixed ``fabric_``, so the database may be shared with other software)."""


def check_state_url(url: str) -> str:
    """The URL, validated (``postgresql://`` or ``postgres://`` with a host or a socket folder).

    Raises:
        ConfigError: another scheme, or no database named.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ConfigError(
            f"{STATE_URL_ENV}: expected postgresql://user:password@host:port/database (replicas on several hosts) "
            f"or sqlite:///<folder> (replicas on this host), got scheme {parts.scheme!r}",
            key=STATE_URL_ENV,
        )
    if not parts.path.strip("/"):
        raise ConfigError(f"{STATE_URL_ENV}: name the database (postgresql://host:port/DATABASE)", key=STATE_URL_ENV)
    return url


def ensure_schema(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Create the tables if missing (idempotent; replicas starting together take turns)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        conn.execute(SCHEMA.encode())


def _redacted(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}{parts.path}"


class SharedState:
    """The pools of one replica over the shared database (open with :meth:`open`, or the ``open_*`` halves).

    Args:
        url: ``FABRIC_STATE_URL``.
        max_size: connections per pool.
        open_timeout: seconds to keep trying to reach the database at start (it may still be starting) before
            :meth:`open` gives up.
    """

    errors: tuple[type[Exception], ...] = (psycopg.Error,)
    """The database's errors (the task worker logs them, and an :class:`OSError`, and polls again)."""

    def __init__(self, url: str, *, max_size: int = 8, open_timeout: float = 15.0) -> None:
        self.url = check_state_url(url)
        self.open_timeout = open_timeout
        self.where = _redacted(url)
        """The URL without credentials (for logs and errors)."""
        self.sync = ConnectionPool(
            url, min_size=1, max_size=max_size, kwargs={"autocommit": True, **KEEPALIVES}, open=False, name="fabric"
        )
        self.aio = AsyncConnectionPool(
            url, min_size=1, max_size=max_size, kwargs={"autocommit": True, **KEEPALIVES}, open=False, name="fabric-a"
        )

    def open_sync(self) -> None:
        """Open the synchronous pool and create the schema (blocking: CLI, or a worker thread).

        Raises:
            ConfigError: the database cannot be reached.
        """
        try:
            self.sync.open(wait=True, timeout=self.open_timeout)
            with self.sync.connection() as conn:
                ensure_schema(conn)
        except (psycopg.Error, TimeoutError) as exc:
            self.sync.close()
            raise ConfigError(f"shared state database {self.where} unreachable: {exc}", key=STATE_URL_ENV) from None

    async def open(self) -> None:
        """Open both pools and create the schema.

        Raises:
            ConfigError: the database cannot be reached.
        """
        import asyncio

        await asyncio.to_thread(self.open_sync)
        try:
            await self.aio.open(wait=True, timeout=self.open_timeout)
        except (psycopg.Error, TimeoutError) as exc:
            await asyncio.to_thread(self.sync.close)
            raise ConfigError(f"shared state database {self.where} unreachable: {exc}", key=STATE_URL_ENV) from None

    def connect(self) -> psycopg.Connection[tuple[object, ...]]:
        """A new connection of its own (autocommit, keepalives), outside the pools: for a held session lock."""
        return psycopg.connect(self.url, autocommit=True, **KEEPALIVES)  # type: ignore[arg-type]

    def task_store(self, tenant: str, owner: str) -> SharedTaskStore:
        """``tenant``'s task queue, run under ``owner``'s name."""
        from fabric.serve.tasks.postgres import SharedTaskStore

        return SharedTaskStore(self, tenant, owner)

    async def secret(self, name: str) -> bytes:
        """The secret ``name`` of the database, created by the first caller."""
        from fabric.serve.state.shared import shared_secret

        return await shared_secret(self.aio, name)

    async def aclose(self) -> None:
        """Close both pools."""
        import asyncio

        await self.aio.close()
        await asyncio.to_thread(self.sync.close)
