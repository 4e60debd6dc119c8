"""API keys in the shared database: what one replica creates or revokes holds for another."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

import fabric.serve.keys.postgres as mod
from fabric.core.errors import ConfigError
from fabric.serve.keys.postgres import SharedKeyStore
from fabric.serve.keys.store import KeyState, KeyStoreError, Role
from fabric.serve.state.postgres import SharedState


@pytest.fixture
def pair(state_url: str) -> Iterator[tuple[SharedKeyStore, SharedKeyStore]]:
    """Two replicas' key stores over one database."""
    states = [SharedState(state_url, max_size=2) for _ in range(2)]
    for s in states:
        s.open_sync()
    try:
        yield SharedKeyStore(states[0].sync), SharedKeyStore(states[1].sync)
    finally:
        for s in states:
            s.sync.close()


def test_key_created_on_one_verifies_on_the_other(pair: tuple[SharedKeyStore, SharedKeyStore]) -> None:
    """A key made through A is verified by B with its tenant and role; a forged secret is not."""
    a, b = pair
    record, token = a.create("acme", Role.WRITER)
    who = b.verify(token)
    assert who is not None
    assert (who.tenant, who.role, who.key_id) == ("acme", Role.WRITER, record.key_id)
    assert b.verify(token[:-4] + "AAAA") is None
    assert b.verify("not-a-key") is None
    assert b.active_count() == 1


def test_revoked_on_one_is_refused_by_the_other(pair: tuple[SharedKeyStore, SharedKeyStore]) -> None:
    """Revoking through A stops the key on B; revoking twice says so."""
    a, b = pair
    record, token = a.create("acme", Role.READER)
    assert a.revoke(record.key_id)
    assert b.verify(token) is None
    assert not b.revoke(record.key_id)
    listed = b.list()
    assert [(r.key_id, r.revoked_at is not None) for r in listed] == [(record.key_id, True)]
    assert b.active_count() == 0


def test_bad_tenant_refused(pair: tuple[SharedKeyStore, SharedKeyStore]) -> None:
    """Tenant names are checked as for the embedded store."""
    with pytest.raises(ConfigError, match="tenant"):
        pair[0].create("Bad Name", Role.READER)


def test_emptying_the_table_locks_and_reopen_is_explicit(
    pair: tuple[SharedKeyStore, SharedKeyStore], state_url: str
) -> None:
    """Keys made through A leave the marker row: with the table emptied behind the store's back B is locked (no
    active key, keys required), never open; reopen refuses while a key is active and otherwise opens the
    database again, for both."""
    a, b = pair
    assert b.state() == KeyState(0, False)
    a.create("acme", Role.ADMIN)
    with psycopg.connect(state_url, autocommit=True) as conn:
        conn.execute("DELETE FROM fabric_api_keys")
    assert (b.state(), b.state().mode) == (KeyState(0, True), "locked")
    a.create("acme", Role.READER)
    with pytest.raises(ConfigError, match="still active"):
        b.reopen()
    (active,) = [r for r in b.list() if r.revoked_at is None]
    assert a.revoke(active.key_id)
    assert b.reopen() == 1
    assert (a.state(), b.list()) == (KeyState(0, False), [])


def test_a_table_gone_is_a_key_store_error(pair: tuple[SharedKeyStore, SharedKeyStore], state_url: str) -> None:
    """The database's own errors (here the key table dropped) are KeyStoreError (the service's 503), not psycopg's."""
    a, _ = pair
    with psycopg.connect(state_url, autocommit=True) as conn:
        conn.execute("DROP TABLE fabric_api_keys")
    for call in (a.state, a.list, lambda: a.verify("fab_0123456789ab_" + "a" * 43), lambda: a.revoke("x")):
        with pytest.raises(KeyStoreError, match="fabric_api_keys"):
            call()


def test_public_api() -> None:
    """The module exports the shared key store and the name of its marker row."""
    assert mod.__all__ == ["MARKER_NAME", "SharedKeyStore"]
