"""The API key store: keys bound to tenants, stored hashed in a real SQLite file, verified and revoked."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import fabric.serve.keys.store as mod
from fabric.core.errors import ConfigError
from fabric.serve.keys.store import KeyState, KeyStore, KeyStoreError, Principal, Role


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


class TestFailClosed:
    """Once a key was created in a home, no active key locks it and a store that cannot be read is an error; only
    reopen() returns the home to open mode."""

    def test_the_first_key_writes_the_marker_and_revoking_it_locks(self, tmp_path: Path) -> None:
        """create() leaves <home>/keys.required; with every key revoked the state is locked, not open."""
        store = KeyStore(tmp_path)
        assert store.state() == KeyState(0, False)
        assert store.state().mode == "open"
        record, _ = store.create("acme", Role.ADMIN)
        assert (tmp_path / mod.KEYS_MARKER).is_file()
        assert store.state() == KeyState(1, True)
        assert store.revoke(record.key_id)
        assert (store.state(), store.state().mode) == (KeyState(0, True), "locked")

    def test_a_deleted_store_is_an_error_not_an_empty_one(self, tmp_path: Path) -> None:
        """keys.sqlite gone while the marker says keys were created: every read raises KeyStoreError (naming the
        file and the remedies) and nothing recreates the file; revoke does not either."""
        store = KeyStore(tmp_path)
        record, token = store.create("acme", Role.ADMIN)
        (tmp_path / mod.KEYS_FILE).unlink()
        for read in (store.state, store.list, lambda: store.verify(token), lambda: store.revoke(record.key_id)):
            with pytest.raises(KeyStoreError, match=r"keys\.sqlite is missing.*fabric keys create"):
                read()
        assert not (tmp_path / mod.KEYS_FILE).exists()

    def test_creating_a_key_recovers_a_deleted_store(self, tmp_path: Path) -> None:
        """A new key in a new keys.sqlite: keyed again, the old key stays unknown."""
        store = KeyStore(tmp_path)
        _, old = store.create("acme", Role.ADMIN)
        (tmp_path / mod.KEYS_FILE).unlink()
        _, new = store.create("acme", Role.ADMIN)
        assert store.state() == KeyState(1, True)
        assert (store.verify(old), store.verify(new) is not None) == (None, True)

    @pytest.mark.parametrize("marked", [True, False])
    def test_a_corrupt_store_is_an_error(self, tmp_path: Path, marked: bool) -> None:
        """Garbage bytes in keys.sqlite: KeyStoreError (a ConfigError, so the CLI exits 2) from every method, with
        or without the marker, never sqlite3's own error."""
        if marked:
            (tmp_path / mod.KEYS_MARKER).write_text("x")
        (tmp_path / mod.KEYS_FILE).write_bytes(b"this is not a database, just garbage " * 200)
        store = KeyStore(tmp_path)
        token = "fab_0123456789ab_" + "a" * 43
        calls = (store.state, store.list, lambda: store.verify(token), lambda: store.revoke("0123456789ab"),
                 lambda: store.create("acme", Role.READER), store.reopen)  # fmt: skip
        for call in calls:
            with pytest.raises(KeyStoreError, match="cannot be used"):
                call()
        assert issubclass(KeyStoreError, ConfigError)

    def test_records_without_the_marker_write_it(self, tmp_path: Path) -> None:
        """A store from before the marker (or a deleted marker): its records, revoked ones too, still lock the home,
        and reading the state puts the marker back, so deleting keys.sqlite afterwards does not reopen it."""
        store = KeyStore(tmp_path)
        record, _ = store.create("acme", Role.READER)
        store.revoke(record.key_id)
        (tmp_path / mod.KEYS_MARKER).unlink()
        assert store.state() == KeyState(0, True)
        assert (tmp_path / mod.KEYS_MARKER).is_file()
        (tmp_path / mod.KEYS_FILE).unlink()
        with pytest.raises(KeyStoreError, match="missing"):
            store.state()

    def test_reopen(self, tmp_path: Path) -> None:
        """reopen() refuses while a key is active (deleting nothing); with every key revoked it deletes their records
        and the marker: open again. A missing keys.sqlite only loses the marker."""
        store = KeyStore(tmp_path)
        first, _ = store.create("acme", Role.READER)
        second, _ = store.create("acme", Role.ADMIN)
        store.revoke(first.key_id)
        with pytest.raises(ConfigError, match=r"1 API key.*still active"):
            store.reopen()
        assert (len(store.list()), store.state()) == (2, KeyState(1, True))
        store.revoke(second.key_id)
        assert store.reopen() == 2
        assert (store.list(), store.state().mode, (tmp_path / mod.KEYS_MARKER).exists()) == ([], "open", False)
        store.create("acme", Role.READER)
        (tmp_path / mod.KEYS_FILE).unlink()
        assert store.reopen() == 0
        assert store.state().mode == "open"


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
        "KEYS_FILE", "KEYS_MARKER", "KeyBackend", "KeyRecord", "KeyState", "KeyStore", "KeyStoreError", "Principal",
        "Role", "active_keys_error", "matches", "new_key", "now_stamp", "token_hash", "token_id",
    }  # fmt: skip
