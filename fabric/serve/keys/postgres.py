"""API keys in the shared database (table ``fabric_api_keys``): the interface of
:class:`fabric.serve.keys.store.KeyStore`,
so every replica verifies the same keys and a key revoked through one replica is refused by all (within the
guard's cache time, :class:`fabric.serve.auth.Guard`).

Same format and hashing as the embedded store (:mod:`fabric.serve.keys.store`). Methods block: the guard calls them from
a
worker thread, the CLI directly.
"""

from __future__ import annotations

from psycopg_pool import ConnectionPool

from fabric.serve.keys.store import KeyRecord, Principal, Role, matches, new_key, now_stamp, token_id

__all__ = ["SharedKeyStore"]


class SharedKeyStore:
    """The key table of the shared database, over a synchronous pool
    (:class:`fabric.serve.state.postgres.SharedState`)."""

    def __init__(self, pool: ConnectionPool) -> None:
        self.pool = pool

    def create(self, tenant: str, role: Role) -> tuple[KeyRecord, str]:
        """A new key for ``tenant``: its record and the key itself (shown once, never stored).

        Raises:
            ConfigError: invalid tenant name.
        """
        from fabric.serve.keys.store import token_hash

        record, token = new_key(tenant, role)
        with self.pool.connection() as conn:
            conn.execute(
                "INSERT INTO fabric_api_keys (key_id, tenant, role, key_hash, created_at) VALUES (%s, %s, %s, %s, %s)",
                (record.key_id, tenant, role.label, token_hash(token), record.created_at),
            )
        return record, token

    def list(self) -> list[KeyRecord]:
        """Every key, revoked ones included, oldest first."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT key_id, tenant, role, created_at, revoked_at FROM fabric_api_keys ORDER BY created_at, key_id"
            ).fetchall()
        return [KeyRecord(str(r[0]), str(r[1]), Role.from_str(str(r[2])), str(r[3]), r[4]) for r in rows]

    def revoke(self, key_id: str) -> bool:
        """Revoke a key by id; False when no active key has that id."""
        with self.pool.connection() as conn:
            cur = conn.execute(
                "UPDATE fabric_api_keys SET revoked_at = %s WHERE key_id = %s AND revoked_at IS NULL",
                (now_stamp(), key_id),
            )
            return cur.rowcount > 0

    def active_count(self) -> int:
        """Number of keys not revoked."""
        with self.pool.connection() as conn:
            row = conn.execute("SELECT count(*) FROM fabric_api_keys WHERE revoked_at IS NULL").fetchone()
        return int(row[0]) if row else 0

    def verify(self, token: str) -> Principal | None:
        """The principal of an active key, or None for a malformed, unknown or revoked key."""
        key_id = token_id(token)
        if key_id is None:
            return None
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT tenant, role, key_hash FROM fabric_api_keys WHERE key_id = %s AND revoked_at IS NULL", (key_id,)
            ).fetchone()
        if row is None or not matches(str(row[2]), token):
            return None
        return Principal(str(row[0]), Role.from_str(str(row[1])), key_id)
