"""The shared database: URL checks, schema creation by replicas starting together, clear errors when unreachable."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

import fabric.serve.state.postgres as mod
from fabric.core.errors import ConfigError
from fabric.serve.state.postgres import SharedState, check_state_url


class TestUrl:
    @pytest.mark.parametrize("url", ["postgresql://u:p@db:5432/fabric", "postgres://db/fabric"])
    def test_postgres_urls_pass(self, url: str) -> None:
        """postgresql:// and postgres:// URLs naming a database are accepted."""
        assert check_state_url(url) == url

    @pytest.mark.parametrize(
        ("url", "words"),
        [("redis://db:6379/0", "scheme 'redis'"), ("postgresql://db:5432", "name the database"), ("db", "scheme ''")],
    )
    def test_others_refused(self, url: str, words: str) -> None:
        """Another scheme, or no database, is a ConfigError naming FABRIC_STATE_URL."""
        with pytest.raises(ConfigError, match=words) as info:
            check_state_url(url)
        assert "FABRIC_STATE_URL" in str(info.value)


async def test_replicas_starting_together_create_one_schema(state_url: str) -> None:
    """Three replicas opening at once create the tables once, without error; every table is there."""
    states = [SharedState(state_url) for _ in range(3)]
    await asyncio.gather(*(s.open() for s in states))
    try:
        with psycopg.connect(state_url) as conn:
            rows = conn.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'fabric_%'").fetchall()
        assert {r[0] for r in rows} == {
            "fabric_tasks", "fabric_idem", "fabric_bodies", "fabric_api_keys", "fabric_buckets", "fabric_secrets",
        }  # fmt: skip
    finally:
        await asyncio.gather(*(s.aclose() for s in states))


def test_unreachable_database_is_a_config_error(postgres_server: object) -> None:
    """A database that does not answer is a ConfigError naming it without its password."""
    state = SharedState("postgresql://fabric:s3cret@127.0.0.1:1/nowhere?connect_timeout=1", open_timeout=1.0)
    state.sync.timeout = 2.0
    with pytest.raises(ConfigError, match="unreachable") as info:
        state.open_sync()
    assert "127.0.0.1:1/nowhere" in str(info.value)
    assert "s3cret" not in str(info.value)


def test_public_api() -> None:
    """The module exports the state, its schema and the URL check."""
    assert set(mod.__all__) == {
        "KEEPALIVES",
        "SCHEMA",
        "STATE_URL_ENV",
        "SharedState",
        "check_state_url",
        "ensure_schema",
    }
