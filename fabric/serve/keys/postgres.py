"""API keys in the shared database (table ``fabric_api_keys``): the interface of
:class:`fabric.serve.keys.store.KeyStore`,
so every replica verifies the same keys and a key revoked through one replica is refused by all (within the
guard's cache time, :class:`fabric.serve.auth.Guard`).

Same format and hashing as the embedded store (:mod:`fabric.serve.keys.store`). Methods block: the guard calls them from
a
worker thread, the CLI directly.

Failing closed as the embedded store does: creating a key also writes the row ``keys:required`` of
``fabric_secrets`` (the shared state's name/value table), so emptying ``fabric_api_keys`` locks the replicas
instead of opening them; a database that cannot be reached or read raises
:class:`~fabric.serve.keys.store.KeyStoreError` (503). :meth:`SharedKeyStore.reopen` (``fabric keys reopen --yes``)
deletes the revoked keys' records and that row.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from fabric.serve.keys.store import (
    KeyRecord,
    KeyState,
    KeyStoreError,
    Principal,
    Role,
    active_keys_error,
    matches,
    new_key,
    now_stamp,
    token_id,
)

__all__ = ["MARKER_NAME", "SharedKeyStore"]

MARKER_NAME = "keys:required"
"""The ``fabric_secrets`` row recording that keys were created in this database."""


class SharedKeyStore:
    """The key table of the shared database, over a synchronous pool
    (:class:`fabric.serve.state.postgres.SharedState`)."""

    def __init__(self, pool: ConnectionPool) -> None:
        self.pool = pool

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[TupleRow]]:
        """A pooled connection; the database's errors (unreachable, pool exhausted, a table gone) become
        :class:`KeyStoreError`."""
        try:
            with self.pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            raise KeyStoreError(f"the API key table of the shared database cannot be used: {exc}") from None

    def create(self, tenant: str, role: Role) -> tuple[KeyRecord, str]:
        """A new key for ``tenant``: its record and the key itself (shown once, never stored).

        Raises:
            ConfigError: invalid tenant name.
            KeyStoreError: the database cannot be written.
        """
        from fabric.serve.keys.store import token_hash

        record, token = new_key(tenant, role)
        with self._connection() as conn, conn.transaction():
            conn.execute(
                "INSERT INTO fabric_secrets (name, value) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING",
                (MARKER_NAME, record.created_at),
            )
            conn.execute(
                "INSERT INTO fabric_api_keys (key_id, tenant, role, key_hash, created_at) VALUES (%s, %s, %s, %s, %s)",
                (record.key_id, tenant, role.label, token_hash(token), record.created_at),
            )
        return record, token

    def list(self) -> list[KeyRecord]:
        """Every key, revoked ones included, oldest first."""
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT key_id, tenant, role, created_at, revoked_at FROM fabric_api_keys ORDER BY created_at, key_id"
            ).fetchall()
        return [KeyRecord(str(r[0]), str(r[1]), Role.from_str(str(r[2])), str(r[3]), r[4]) for r in rows]

    def revoke(self, key_id: str) -> bool:
        """Revoke a key by id; False when no active key has that id."""
        with self._connection() as conn:
            cur = conn.execute(
                "UPDATE fabric_api_keys SET revoked_at = %s WHERE key_id = %s AND revoked_at IS NULL",
                (now_stamp(), key_id),
            )
            return cur.rowcount > 0

    def active_count(self) -> int:
        """Number of keys not revoked."""
        return self.state().active

    def state(self) -> KeyState:
        """The active keys, and whether keys were ever created (the marker row, or any key record)."""
        with self._connection() as conn:
            row = conn.execute(
                "SELECT count(*) FILTER (WHERE revoked_at IS NULL), count(*), "
                "EXISTS (SELECT 1 FROM fabric_secrets WHERE name = %s) FROM fabric_api_keys",
                (MARKER_NAME,),
            ).fetchone()
        active, total, marked = row if row else (0, 0, False)
        return KeyState(int(active), bool(total) or bool(marked))

    def reopen(self) -> int:
        """Return the replicas to open mode: delete the revoked keys' records and the marker row, in one
        transaction; the number of records deleted.

        Raises:
            ConfigError: a key is still active (nothing is deleted).
            KeyStoreError: the database cannot be used.
        """
        with self._connection() as conn, conn.transaction():
            conn.execute("LOCK TABLE fabric_api_keys IN EXCLUSIVE MODE")  # no key is created meanwhile
            row = conn.execute("SELECT count(*) FROM fabric_api_keys WHERE revoked_at IS NULL").fetchone()
            active = int(row[0]) if row else 0
            if active:
                raise active_keys_error(active)
            removed = conn.execute("DELETE FROM fabric_api_keys").rowcount
            conn.execute("DELETE FROM fabric_secrets WHERE name = %s", (MARKER_NAME,))
        return removed

    def verify(self, token: str) -> Principal | None:
        """The principal of an active key, or None for a malformed, unknown or revoked key."""
        key_id = token_id(token)
        if key_id is None:
            return None
        with self._connection() as conn:
            row = conn.execute(
                "SELECT tenant, role, key_hash FROM fabric_api_keys WHERE key_id = %s AND revoked_at IS NULL", (key_id,)
            ).fetchone()
        if row is None or not matches(str(row[2]), token):
            return None
        return Principal(str(row[0]), Role.from_str(str(row[1])), key_id)
