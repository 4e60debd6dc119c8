"""The API key store: keys bound to tenants, stored hashed in a real SQLite file, verified and revoked."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import fabric.serve.keys.store as mod
from fabric.core.errors import ConfigError
from fabric.serve.keys.store import KeyStore, Principal, Role


class TestKeyStore:
    def test_create_then_verify(self, tmp_path: Path) -> None:
        """A created key verifies to its tenant and role."""
        store = KeyStore(tmp_path)
        record, token = store.create("acme", Role.WRITER)
        assert token.startswith(f"fab_{record.key_id}_")
        assert store.verify(token) == Principal("acme", Role.WRITER, record.key_id)

    def test_only_a_hash_is_stored(self, tmp_path: Path) -> None:
        """The file holds the SHA-256 of the key, never the key or its secret part."""
        store = KeyStore(tmp_path)
        record, token = store.create("acme", Role.READER)
        raw = (tmp_path / mod.KEYS_FILE).read_bytes()
        secret = token.removeprefix(f"fab_{record.key_id}_")  # the secret may itself hold "_" (token_urlsafe)
        assert len(secret) >= 40
        assert token.encode() not in raw
        assert secret.encode() not in raw
        with sqlite3.connect(tmp_path / mod.KEYS_FILE) as conn:
            (stored,) = conn.execute("SELECT key_hash FROM api_keys").fetchone()
        assert len(stored) == 64

    @pytest.mark.parametrize("mangle", [lambda t: t[:-1] + ("A" if t[-1] != "A" else "B"), lambda t: "", lambda t: "x",
                                        lambda t: t.replace("fab_", "fab_0")])  # fmt: skip
    def test_wrong_keys_do_not_verify(self, tmp_path: Path, mangle) -> None:
        """A changed, empty or malformed key is unknown."""
        store = KeyStore(tmp_path)
        _, token = store.create("acme", Role.ADMIN)
        assert store.verify(mangle(token)) is None

    def test_revoke(self, tmp_path: Path) -> None:
        """A revoked key no longer verifies; revoking twice reports False; list keeps it with the date."""
        store = KeyStore(tmp_path)
        record, token = store.create("acme", Role.READER)
        assert store.active_count() == 1
        assert store.revoke(record.key_id) is True
        assert store.revoke(record.key_id) is False
        assert store.verify(token) is None
        assert store.active_count() == 0
        (listed,) = store.list()
        assert (listed.key_id, listed.revoked_at is not None) == (record.key_id, True)

    def test_empty_home_has_no_keys(self, tmp_path: Path) -> None:
        """No file yet: no keys, nothing verifies, and nothing is created by reading."""
        store = KeyStore(tmp_path / "home")
        assert (store.active_count(), store.list(), store.verify("fab_0123456789ab_" + "a" * 43)) == (0, [], None)
        assert not (tmp_path / "home").exists()

    @pytest.mark.parametrize("name", ["", "Acme", "-x", "a b", "x" * 64, "a/b"])
    def test_bad_tenant_names(self, tmp_path: Path, name: str) -> None:
        """Tenant names are 1-63 lower-case letters, digits, '-' and '_'."""
        with pytest.raises(ConfigError, match="tenant"):
            KeyStore(tmp_path).create(name, Role.READER)


class TestRole:
    def test_order_and_parsing(self) -> None:
        """admin > writer > reader; names parse case-insensitively; others are refused."""
        assert Role.ADMIN > Role.WRITER > Role.READER
        assert Role.from_str(" Writer ") is Role.WRITER
        with pytest.raises(ValueError, match="valid: reader, writer, admin"):
            Role.from_str("root")


def test_public_api() -> None:
    """The module exports the store, its records and roles, and the key helpers the shared key store reuses."""
    assert set(mod.__all__) == {
        "KEYS_FILE", "KeyBackend", "KeyRecord", "KeyStore", "Principal", "Role", "matches",
        "new_key", "now_stamp", "token_hash", "token_id",
    }  # fmt: skip
