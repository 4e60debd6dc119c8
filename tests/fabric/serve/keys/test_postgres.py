"""API keys in the shared database: what one replica creates or revokes holds for another."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import fabric.serve.keys.postgres as mod
from fabric.core.errors import ConfigError
from fabric.serve.keys.postgres import SharedKeyStore
from fabric.serve.keys.store import Role
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


def test_public_api() -> None:
    """The module exports the shared key store."""
    assert mod.__all__ == ["SharedKeyStore"]
