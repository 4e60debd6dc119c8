"""API keys bound to tenants, stored hashed in ``<home>/keys.sqlite``.

A key is ``fab_<key id>_<secret>``: the id (12 hex digits) names the key in listings and revocations, the secret
is 32 random bytes (``secrets.token_urlsafe``). Only the SHA-256 of the whole key is stored — a plain hash is
enough for a 256-bit random token (no dictionary to guess from, unlike a password) — and compared with
:func:`hmac.compare_digest`. The key itself is shown once, by ``fabric keys create``.

Roles, each including the one before: ``reader`` (search, read tasks and metrics), ``writer`` (ingest entries
that are untrusted imports), ``admin`` (also entries marked ``trust: trusted`` or ``source_kind: operator``).
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import re
import secrets
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from fabric.core.tenants import check_tenant

__all__ = [
    "KEYS_FILE",
    "KeyBackend",
    "KeyRecord",
    "KeyStore",
    "Principal",
    "Role",
    "matches",
    "new_key",
    "now_stamp",
    "token_hash",
    "token_id",
]

KEYS_FILE = "keys.sqlite"
"""File name of the key store under the home."""

_TOKEN = re.compile(r"^fab_([0-9a-f]{12})_[A-Za-z0-9_-]{40,64}$")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    key_id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    role TEXT NOT NULL,
    key_hash TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
"""


class Role(enum.IntEnum):
    """What a key may do; a higher role includes the lower ones."""

    READER = 1
    WRITER = 2
    ADMIN = 3

    @classmethod
    def from_str(cls, value: str) -> Role:
        """Parse ``reader``, ``writer`` or ``admin``.

        Raises:
            ValueError: any other value.
        """
        try:
            return cls[value.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown role {value!r}; valid: reader, writer, admin") from None

    @property
    def label(self) -> str:
        """The lower-case name."""
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the tenant, the role, and the key id (None in open mode)."""

    tenant: str
    role: Role
    key_id: str | None = None


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """One stored key (never its secret)."""

    key_id: str
    tenant: str
    role: Role
    created_at: str
    revoked_at: str | None

    def to_dict(self) -> dict[str, str | None]:
        """JSON-ready form for ``fabric keys list --json``."""
        return {
            "key_id": self.key_id, "tenant": self.tenant, "role": self.role.label, "created_at": self.created_at,
            "revoked_at": self.revoked_at,
        }  # fmt: skip


def token_hash(token: str) -> str:
    """The stored form of a key: its SHA-256, hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def token_id(token: str) -> str | None:
    """The key id of a well-formed key, else None."""
    m = _TOKEN.match(token)
    return m.group(1) if m else None


def new_key(tenant: str, role: Role) -> tuple[KeyRecord, str]:
    """A fresh key id and key for ``tenant`` (not stored yet): the record and the key.

    Raises:
        ConfigError: invalid tenant name.
    """
    check_tenant(tenant)
    key_id = secrets.token_hex(6)
    return KeyRecord(key_id, tenant, role, now_stamp(), None), f"fab_{key_id}_{secrets.token_urlsafe(32)}"


def now_stamp() -> str:
    """The current UTC time as the key tables store it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def matches(stored_hash: str, token: str) -> bool:
    """Whether ``token`` hashes to ``stored_hash`` (constant-time comparison)."""
    return hmac.compare_digest(stored_hash, token_hash(token))


class KeyBackend(Protocol):
    """A key store: :class:`KeyStore` (``<home>/keys.sqlite``) or :class:`fabric.serve.keys.postgres.SharedKeyStore`
    (the replicas' database). Methods block."""

    def create(self, tenant: str, role: Role) -> tuple[KeyRecord, str]: ...
    def list(self) -> list[KeyRecord]: ...
    def revoke(self, key_id: str) -> bool: ...
    def active_count(self) -> int: ...
    def verify(self, token: str) -> Principal | None: ...


class KeyStore:
    """The key table; every method opens its own short connection (safe from any thread)."""

    def __init__(self, home: Path) -> None:
        self.path = home / KEYS_FILE

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=10.0)
        conn.executescript(_SCHEMA)
        return conn

    def create(self, tenant: str, role: Role) -> tuple[KeyRecord, str]:
        """A new key for ``tenant``: its record and the key itself (shown once, never stored).

        Raises:
            ConfigError: invalid tenant name.
        """
        record, token = new_key(tenant, role)
        conn = self._connect()
        try:
            with conn:
                conn.execute(
                    "INSERT INTO api_keys (key_id, tenant, role, key_hash, created_at) VALUES (?, ?, ?, ?, ?)",
                    (record.key_id, tenant, role.label, token_hash(token), record.created_at),
                )
        finally:
            conn.close()
        return record, token

    def list(self) -> list[KeyRecord]:
        """Every key, revoked ones included, oldest first."""
        if not self.path.exists():
            return []
        conn = self._connect()
        try:
            rows = conn.execute(
                "SELECT key_id, tenant, role, created_at, revoked_at FROM api_keys ORDER BY created_at, key_id"
            ).fetchall()
        finally:
            conn.close()
        return [KeyRecord(r[0], r[1], Role.from_str(r[2]), r[3], r[4]) for r in rows]

    def revoke(self, key_id: str) -> bool:
        """Revoke a key by id; False when no active key has that id."""
        conn = self._connect()
        try:
            with conn:
                cur = conn.execute(
                    "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL", (now_stamp(), key_id)
                )
        finally:
            conn.close()
        return cur.rowcount > 0

    def active_count(self) -> int:
        """Number of keys not revoked (0: the service runs in open mode where that is allowed)."""
        if not self.path.exists():
            return 0
        conn = self._connect()
        try:
            row = conn.execute("SELECT COUNT(*) FROM api_keys WHERE revoked_at IS NULL").fetchone()
        finally:
            conn.close()
        return int(row[0])

    def verify(self, token: str) -> Principal | None:
        """The principal of an active key, or None for a malformed, unknown or revoked key."""
        key_id = token_id(token)
        if key_id is None or not self.path.exists():
            return None
        conn = self._connect()
        try:
            row = conn.execute(
                "SELECT tenant, role, key_hash FROM api_keys WHERE key_id = ? AND revoked_at IS NULL", (key_id,)
            ).fetchone()
        finally:
            conn.close()
        if row is None or not matches(row[2], token):
            return None
        return Principal(row[0], Role.from_str(row[1]), key_id)
