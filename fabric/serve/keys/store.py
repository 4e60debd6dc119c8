"""API keys bound to tenants, stored hashed in ``<home>/keys.sqlite``.

A key is ``fab_<key id>_<secret>``: the id (12 hex digits) names the key in listings and revocations, the secret
is 32 random bytes (``secrets.token_urlsafe``). Only the SHA-256 of the whole key is stored — a plain hash is
enough for a 256-bit random token (no dictionary to guess from, unlike a password) — and compared with
:func:`hmac.compare_digest`. The key itself is shown once, by ``fabric keys create``.

Roles, each including the one before: ``reader`` (search, read tasks and metrics), ``writer`` (ingest entries
that are untrusted imports), ``admin`` (also entries marked ``trust: trusted`` or ``source_kind: operator``).

Failing closed (:meth:`KeyStore.state`): the first key created also writes ``<home>/keys.required``, a marker
*outside* ``keys.sqlite``, and a store holding any key record (revoked ones included) writes it too. Once it is
there, no active key means the service is locked, never open; ``keys.sqlite`` missing or unreadable raises
:class:`KeyStoreError` (the service answers 503). Only :meth:`KeyStore.reopen` (``fabric keys reopen --yes``)
removes the marker, with the records of the revoked keys, and so returns the home to open mode.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import re
import secrets
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from fabric.core.errors import ConfigError
from fabric.core.tenants import check_tenant

__all__ = [
    "KEYS_FILE",
    "KEYS_MARKER",
    "KeyBackend",
    "KeyRecord",
    "KeyState",
    "KeyStore",
    "KeyStoreError",
    "Principal",
    "Role",
    "active_keys_error",
    "matches",
    "new_key",
    "now_stamp",
    "token_hash",
    "token_id",
]

KEYS_FILE = "keys.sqlite"
"""File name of the key store under the home."""
KEYS_MARKER = "keys.required"
"""File name, under the home, of the marker that keys were created there (the service then fails closed)."""
_MARKER_TEXT = (
    "API keys were created in this home: with no active key the service is locked, and with keys.sqlite missing\n"
    "or unreadable it answers 503. `fabric keys reopen --yes` (no active key left) returns it to open mode.\n"
)

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


class KeyStoreError(ConfigError):
    """The key store cannot be used: missing although keys were created, corrupt or unreadable, or its database
    unreachable. The service answers 503 (it fails closed), the CLI exits 2 with the message."""


@dataclass(frozen=True, slots=True)
class KeyState:
    """What the guard decides from: the number of ``active`` keys, and whether keys were ever created
    (``required``: then no active key locks the service instead of opening it)."""

    active: int
    required: bool

    @property
    def mode(self) -> str:
        """``keyed`` (an active key exists), ``locked`` (keys were created, none is active) or ``open`` (no key
        was ever created)."""
        return "keyed" if self.active else "locked" if self.required else "open"


class KeyBackend(Protocol):
    """A key store: :class:`KeyStore` (``<home>/keys.sqlite``) or :class:`fabric.serve.keys.postgres.SharedKeyStore`
    (the replicas' database). Methods block; every one may raise :class:`KeyStoreError`."""

    def create(self, tenant: str, role: Role) -> tuple[KeyRecord, str]: ...
    def list(self) -> list[KeyRecord]: ...
    def revoke(self, key_id: str) -> bool: ...
    def active_count(self) -> int: ...
    def state(self) -> KeyState: ...
    def reopen(self) -> int: ...
    def verify(self, token: str) -> Principal | None: ...


def active_keys_error(active: int) -> ConfigError:
    """Why :meth:`KeyBackend.reopen` refuses while keys are active."""
    return ConfigError(f"{active} API key(s) still active: revoke them first (fabric keys list, fabric keys revoke)")


class KeyStore:
    """The key table; every method opens its own short connection (safe from any thread).

    Reads open the file read-only and never create it; a missing file means no key only while the home holds
    no :data:`KEYS_MARKER`.
    """

    def __init__(self, home: Path) -> None:
        self.path = home / KEYS_FILE
        self.marker = home / KEYS_MARKER

    def _unreadable(self, exc: Exception) -> KeyStoreError:
        return KeyStoreError(
            f"the API key store {self.path} cannot be used ({exc}): the service answers 503 until it is repaired. "
            "Restore it from a backup, or move it away and create a key with `fabric keys create`"
        )

    def _missing(self) -> KeyStoreError:
        return KeyStoreError(
            f"the API key store {self.path} is missing but keys were created in this home ({self.marker}): the "
            "service answers 503 until a key exists again. Restore keys.sqlite from a backup or create a key with "
            "`fabric keys create`; `fabric keys reopen --yes` returns the home to open mode"
        )

    def _marked(self) -> bool:
        try:
            return self.marker.exists()
        except OSError as exc:
            raise self._unreadable(exc) from None

    def _mark(self) -> None:
        """Record that keys exist in this home (kept if already there)."""
        try:
            self.marker.parent.mkdir(parents=True, exist_ok=True)
            with self.marker.open("x", encoding="utf-8") as fh:
                fh.write(_MARKER_TEXT)
        except FileExistsError:
            pass
        except OSError as exc:
            raise self._unreadable(exc) from None

    def _read(self, sql: str, params: tuple[str, ...] = ()) -> list[tuple[Any, ...]] | None:
        """The rows of a read-only query, or None when the home has no key table yet.

        Raises:
            KeyStoreError: the file is missing although keys were created, or it cannot be read.
        """
        try:
            if not self.path.exists():
                if self._marked():
                    raise self._missing()
                return None
            conn = sqlite3.connect(f"{self.path.absolute().as_uri()}?mode=ro", uri=True, timeout=10.0)
            try:
                if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'api_keys'").fetchone():
                    return conn.execute(sql, params).fetchall()
                return None
            finally:
                conn.close()
        except (sqlite3.Error, OSError) as exc:
            raise self._unreadable(exc) from None

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """A read-write connection in a transaction (creating the file and the table).

        Raises:
            KeyStoreError: the file cannot be opened or written.
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=10.0)
            try:
                conn.executescript(_SCHEMA)
                with conn:
                    yield conn
            finally:
                conn.close()
        except (sqlite3.Error, OSError) as exc:
            raise self._unreadable(exc) from None

    def create(self, tenant: str, role: Role) -> tuple[KeyRecord, str]:
        """A new key for ``tenant``: its record and the key itself (shown once, never stored). The marker is
        written first, so a crash in between leaves the home locked, not open.

        Raises:
            ConfigError: invalid tenant name.
            KeyStoreError: the store cannot be written.
        """
        record, token = new_key(tenant, role)
        self._mark()
        with self._writing() as conn:
            conn.execute(
                "INSERT INTO api_keys (key_id, tenant, role, key_hash, created_at) VALUES (?, ?, ?, ?, ?)",
                (record.key_id, tenant, role.label, token_hash(token), record.created_at),
            )
        return record, token

    def list(self) -> list[KeyRecord]:
        """Every key, revoked ones included, oldest first."""
        rows = self._read(
            "SELECT key_id, tenant, role, created_at, revoked_at FROM api_keys ORDER BY created_at, key_id"
        )
        try:
            return [KeyRecord(r[0], r[1], Role.from_str(r[2]), r[3], r[4]) for r in rows or ()]
        except ValueError as exc:
            raise self._unreadable(exc) from None

    def revoke(self, key_id: str) -> bool:
        """Revoke a key by id; False when no active key has that id."""
        if self._read("SELECT 1") is None:  # no store: nothing to revoke (and none is created)
            return False
        with self._writing() as conn:
            cur = conn.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL", (now_stamp(), key_id)
            )
        return cur.rowcount > 0

    def active_count(self) -> int:
        """Number of keys not revoked."""
        return self.state().active

    def state(self) -> KeyState:
        """The active keys, and whether keys were ever created here (the marker, or any record; a record without
        the marker, from a store older than it or after the marker was deleted, writes it again)."""
        rows = self._read("SELECT COUNT(*), COALESCE(SUM(revoked_at IS NULL), 0) FROM api_keys")
        total, active = rows[0] if rows else (0, 0)
        marked = self._marked()
        if total and not marked:
            with suppress(KeyStoreError):  # a read-only home: the records alone still require a key
                self._mark()
        return KeyState(int(active), bool(total) or marked)

    def reopen(self) -> int:
        """Return the home to open mode: delete the records of the revoked keys, then the marker; the number of
        records deleted. A missing ``keys.sqlite`` only loses the marker.

        Raises:
            ConfigError: a key is still active (nothing is deleted).
            KeyStoreError: the store cannot be read or written.
        """
        removed = 0
        try:
            exists = self.path.exists()
        except OSError as exc:
            raise self._unreadable(exc) from None
        if exists and self._read("SELECT 1") is not None:
            with self._writing() as conn:
                cur = conn.execute(
                    "DELETE FROM api_keys WHERE NOT EXISTS (SELECT 1 FROM api_keys WHERE revoked_at IS NULL)"
                )
                removed = cur.rowcount
                (active,) = conn.execute("SELECT COUNT(*) FROM api_keys WHERE revoked_at IS NULL").fetchone()
            if active:
                raise active_keys_error(int(active))
        try:
            self.marker.unlink(missing_ok=True)
        except OSError as exc:
            raise self._unreadable(exc) from None
        return removed

    def verify(self, token: str) -> Principal | None:
        """The principal of an active key, or None for a malformed, unknown or revoked key.

        Raises:
            KeyStoreError: the store is missing although keys were created, or cannot be read.
        """
        key_id = token_id(token)
        if key_id is None:
            return None
        rows = self._read(
            "SELECT tenant, role, key_hash FROM api_keys WHERE key_id = ? AND revoked_at IS NULL", (key_id,)
        )
        if not rows or not matches(rows[0][2], token):
            return None
        try:
            return Principal(rows[0][0], Role.from_str(rows[0][1]), key_id)
        except ValueError as exc:
            raise self._unreadable(exc) from None
