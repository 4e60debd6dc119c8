"""Per-request shared state over the asynchronous pool: the tenants' token buckets and the cursor secret.

Token buckets (table ``fabric_buckets``): one row per bucket, refilled and taken by one call of the SQL function
``fabric_take_token`` (:data:`fabric.serve.state.postgres.SCHEMA`), which locks the row first, so concurrent requests on
any replica serialise on it and a tenant gets ``rate`` requests per second in total, however its traffic is
spread. Time is the database server's (``clock_timestamp()``, read under the lock), so the replicas' clocks need
not agree.

Cursor secret (table ``fabric_secrets``): created once by the first replica (``ON CONFLICT DO NOTHING``), read by
all, so a cursor minted by one replica is accepted by every other (``FABRIC_CURSOR_SECRET``, when set, still wins).
"""

from __future__ import annotations

import secrets

from psycopg_pool import AsyncConnectionPool

__all__ = ["SharedBuckets", "shared_secret"]


class SharedBuckets:
    """Token buckets in the shared database (:class:`fabric.serve.limits.tenants.TenantLimits` takes from them
    when given)."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self.pool = pool

    async def take(self, name: str, rate: float, burst: int) -> float:
        """Take one token of bucket ``name``: 0.0 when granted, else the seconds until one is available."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT fabric_take_token(%(name)s, %(rate)s, %(burst)s)",
                {"name": name, "rate": float(rate), "burst": float(burst)},
            )
            row = await cur.fetchone()
        left = float(row[0]) if row else 0.0
        return 0.0 if left >= 0.0 else -left


async def shared_secret(pool: AsyncConnectionPool, name: str) -> bytes:
    """The secret ``name`` of the shared database, created (random, 64 hex digits) by the first caller."""
    async with pool.connection() as conn:
        await conn.execute(
            "INSERT INTO fabric_secrets (name, value) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING",
            (name, secrets.token_hex(32)),
        )
        cur = await conn.execute("SELECT value FROM fabric_secrets WHERE name = %s", (name,))
        row = await cur.fetchone()
    if row is None:
        raise RuntimeError(f"shared secret {name!r} vanished")
    return str(row[0]).encode("ascii")
