"""Authentication fails closed (issue 42, class 3), over real HTTP on loopback against the service app and its real
key store: revoking the last key (through the real CLI) or losing ``keys.sqlite`` never opens the service, a
corrupt key store answers 503, and open mode answers only requests whose ``Host`` and ``Origin`` name this machine,
``/mcp`` included (one check, the guard's)."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from aiohttp.test_utils import TestClient, TestServer
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from fabric.cli import main
from fabric.query.engine import Engine
from fabric.serve.auth import Guard
from fabric.serve.hosts import HostPolicy
from fabric.serve.keys.store import KEYS_FILE, KEYS_MARKER, KeyStore, Role
from fabric.serve.limits.tenants import LimitConfig, TenantLimits, TenantMetrics
from fabric.serve.service import create_app
from fabric.settings import load_settings
from lanes.base import LaneResources
from lanes.fake import FakeLane
from tests.support.logs import captured_events

SEARCH = {"query": "rrf", "budget_ms": 300, "top_k": 3}
TRUSTED = {"entries": [{"id": "op-1", "title": "Runbook", "text": "Rotate the keys.", "trust": "trusted"}]}
MCP_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


class Clock:
    """A settable monotonic clock: the guard's cache time passes when the test says so, never by waiting."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def _client(home: Path, clock: Clock, hosts: HostPolicy | None = None) -> TestClient:
    """The service app (MCP mounted) over a fake lane, guarded by the home's real key store."""
    settings = load_settings(env={"FABRIC_HOME": str(home)})
    engine = Engine(settings, lanes={"keyword": FakeLane(name="keyword", hits=5)}, resources=LaneResources(home=home))
    guard = Guard(
        KeyStore(home), TenantLimits(LimitConfig(), clock=clock), TenantMetrics(engine.metrics.registry),
        clock=clock, hosts=hosts,
    )  # fmt: skip
    client = TestClient(TestServer(create_app(engine, guard=guard), host="127.0.0.1"))
    await client.start_server()
    return client


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[TestClient, Clock, Path]]:
    """A live service over ``tmp_path/home`` (no key yet), its clock and its home."""
    home = tmp_path / "home"
    home.mkdir()
    clock = Clock()
    client = await _client(home, clock)
    yield client, clock, home
    await client.close()


def _cli(home: Path, *argv: str) -> int:
    return main(["--home", str(home), "keys", *argv])


def _create_key(home: Path, capsys: pytest.CaptureFixture[str], role: str = "admin") -> dict[str, str]:
    assert _cli(home, "create", "--tenant", "acme", "--role", role, "--json") == 0
    out: dict[str, str] = json.loads(capsys.readouterr().out)
    return out


async def _every_door(client: TestClient, headers: dict[str, str] | None = None) -> list[tuple[int, Any]]:
    """Status and error body of a search, a trusted ingest, the metrics and an MCP call."""
    out = []
    for method, path, body in (("POST", "/v1/search", SEARCH), ("POST", "/v1/ingest", TRUSTED),
                               ("GET", "/metrics", None), ("POST", "/mcp", MCP_LIST)):  # fmt: skip
        resp = await client.request(method, path, json=body, headers={**MCP_HEADERS, **(headers or {})})
        out.append((resp.status, (await resp.json())["error"] if resp.status >= 400 else None))
    return out


class TestLocked:
    @pytest.mark.fault
    async def test_cli_revoke_of_the_last_key_locks_a_running_service(
        self, served: tuple[TestClient, Clock, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """``fabric keys revoke`` of the only key: within the cache time every guarded route, /mcp included,
        answers 401 naming the lock (a trusted ingest without a key is refused), never open mode; the probes
        answer and /readyz says locked. The CLI says it locked the service."""
        client, clock, home = served
        key = _create_key(home, capsys)
        clock.now += 6
        assert (await client.post("/v1/search", json=SEARCH, headers={"Authorization": f"Bearer {key['key']}"})).ok
        assert _cli(home, "revoke", key["key_id"]) == 0
        assert "the service is now locked" in capsys.readouterr().err
        clock.now += 6
        for status, error in await _every_door(client):
            assert (status, error["field"]) == (401, "authorization")
            assert "the service is locked" in error["message"]
        assert [s for s, _ in await _every_door(client, {"Authorization": f"Bearer {key['key']}"})] == [401] * 4
        assert (await client.get("/healthz")).status == 200
        assert (await (await client.get("/readyz")).json())["keys"] == {"mode": "locked"}

    async def test_a_later_start_stays_locked(self, tmp_path: Path) -> None:
        """A service started over a home whose keys are all revoked is locked from its first request."""
        store = KeyStore(tmp_path)
        store.revoke(store.create("acme", Role.ADMIN)[0].key_id)
        client = await _client(tmp_path, Clock())
        try:
            assert [s for s, _ in await _every_door(client)] == [401] * 4
        finally:
            await client.close()

    async def test_reopen_is_the_one_way_back(
        self, served: tuple[TestClient, Clock, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """``fabric keys reopen`` needs --yes and no active key (exit 2 with one line otherwise); then the running
        service is open again within the cache time."""
        client, clock, home = served
        key = _create_key(home, capsys)
        assert _cli(home, "reopen", "--yes") == 2
        assert "still active" in capsys.readouterr().err
        assert _cli(home, "revoke", key["key_id"]) == 0
        assert _cli(home, "reopen") == 2
        assert "--yes" in capsys.readouterr().err
        clock.now += 6
        assert (await client.post("/v1/search", json=SEARCH)).status == 401
        assert _cli(home, "reopen", "--yes") == 0
        assert not (home / KEYS_MARKER).exists()
        clock.now += 6
        assert (await client.post("/v1/search", json=SEARCH)).status == 200


class TestUnavailable:
    async def test_deleting_keys_sqlite_while_serving_is_503(
        self, served: tuple[TestClient, Clock, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """keys.sqlite deleted under a running service: every guarded route answers 503 with the usual error body
        (never open mode, never a 500), the log says key_store_unavailable naming the file, /healthz answers and
        /readyz is 503 saying why. Creating a key again serves that key."""
        client, clock, home = served
        key = _create_key(home, capsys)
        (home / KEYS_FILE).unlink()
        clock.now += 6
        with captured_events(logging.WARNING) as events:
            doors = await _every_door(client)
            with_key = await _every_door(client, {"Authorization": f"Bearer {key['key']}"})
        for status, error in doors + with_key:
            assert (status, error["field"]) == (503, None)
            assert "key store cannot be read" in error["message"]
            assert str(home) not in error["message"]  # the path goes to the log only
        (logged,) = [e for e in events if e["event"] == "key_store_unavailable"]  # once per cache time
        assert (logged["log_level"], logged["status"]) == ("error", 503)
        assert str(home / KEYS_FILE) in logged["error"]
        assert (await client.get("/healthz")).status == 200
        ready = await client.get("/readyz")
        assert (ready.status, (await ready.json())["keys"]["mode"]) == (503, "unavailable")
        new = _create_key(home, capsys)
        clock.now += 6
        assert (await client.post("/v1/search", json=SEARCH, headers={"Authorization": f"Bearer {new['key']}"})).ok
        assert (await client.post("/v1/search", json=SEARCH)).status == 401

    async def test_a_later_start_without_keys_sqlite_is_503(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The marker outside keys.sqlite remembers that keys existed: a service started after keys.sqlite was lost
        answers 503 on every guarded route, not open mode."""
        _create_key(tmp_path, capsys)
        (tmp_path / KEYS_FILE).unlink()
        client = await _client(tmp_path, Clock())
        try:
            assert [s for s, _ in await _every_door(client)] == [503] * 4
        finally:
            await client.close()

    @pytest.mark.fault
    async def test_corrupt_keys_sqlite_is_503(
        self, served: tuple[TestClient, Clock, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Garbage bytes in keys.sqlite: 503 with the usual body on every guarded route (was a 500), and the CLI
        exits 2 with one line, no traceback; moving the file away and creating a key recovers."""
        client, clock, home = served
        (home / KEYS_FILE).write_bytes(b"\x00garbage, not an SQLite file\xff" * 300)
        assert [(s, e["field"]) for s, e in await _every_door(client)] == [(503, None)] * 4
        assert _cli(home, "list") == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert "cannot be used" in err
        assert "Traceback" not in err
        (home / KEYS_FILE).rename(home / "keys.sqlite.corrupt")
        key = _create_key(home, capsys)
        clock.now += 6
        assert (await client.post("/v1/search", json=SEARCH, headers={"Authorization": f"Bearer {key['key']}"})).ok


class TestOpenModeHosts:
    @pytest.mark.parametrize("host", ["evil.example", "evil.example:8080", "127.0.0.1.evil.example", "10.0.0.5"])
    async def test_a_foreign_host_is_421_at_every_door(self, served: tuple[TestClient, Clock, Path], host: str) -> None:
        """Without keys, a Host that is not loopback (a DNS-rebinding page's) is 421 naming the host, on /v1/*,
        /metrics and /mcp alike: the trusted ingest of the finding never runs."""
        client, _clock, _home = served
        for status, error in await _every_door(client, {"Host": host}):
            assert (status, error["field"]) == (421, "host")
        assert (await client.get("/healthz", headers={"Host": host})).status == 200

    @pytest.mark.parametrize("origin", ["http://evil.example", "https://evil.example:8080", "null", "file://"])
    async def test_a_foreign_origin_is_403(self, served: tuple[TestClient, Clock, Path], origin: str) -> None:
        """Without keys, an Origin that is not a loopback page is 403 naming the origin, /mcp included."""
        client, _clock, _home = served
        for status, error in await _every_door(client, {"Origin": origin}):
            assert (status, error["field"]) == (403, "origin")

    @pytest.mark.parametrize(
        ("host", "origin"),
        [("localhost", None), ("localhost:8080", "http://localhost:8080"), ("127.0.0.1", "http://127.0.0.1:3000"),
         ("127.1.2.3:9", None), ("[::1]:8080", "http://[::1]:8080"), ("LOCALHOST:1", "https://localhost")],
    )  # fmt: skip
    async def test_loopback_hosts_and_origins_pass(
        self, served: tuple[TestClient, Clock, Path], host: str, origin: str | None
    ) -> None:
        """localhost, 127.0.0.0/8 and [::1], with or without a port, are served in open mode."""
        client, _clock, _home = served
        headers = {"Host": host, **({"Origin": origin} if origin else {})}
        assert (await client.post("/v1/search", json=SEARCH, headers=headers)).status == 200

    async def test_an_allowed_host_reaches_mcp_through_the_sdk_client(self, tmp_path: Path) -> None:
        """A name allowed by the operator (``fabric serve --allow-host``) is served on /v1/* and by /mcp to the MCP
        SDK's own client (the SDK's check, which would answer 421 on a loopback bind, is off: the guard decides),
        while another name is still 421."""
        client = await _client(tmp_path, Clock(), HostPolicy.of(["fabric.lan"]))
        url = str(client.make_url("/mcp"))
        try:
            assert (await client.post("/v1/search", json=SEARCH, headers={"Host": "fabric.lan:8080"})).status == 200
            async with (
                httpx2.AsyncClient(headers={"Host": "fabric.lan:8080", "Origin": "http://fabric.lan:8080"}) as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                tools = await session.list_tools()
            assert "query" in {t.name for t in tools.tools}
            resp = await client.post("/mcp", json=MCP_LIST, headers={**MCP_HEADERS, "Host": "other.lan"})
            assert resp.status == 421
        finally:
            await client.close()

    async def test_with_keys_the_key_decides_not_the_host(
        self, served: tuple[TestClient, Clock, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Once keys exist a page cannot forge one: a valid key is served whatever the Host (a reverse proxy's
        name), and no key is 401, not 421."""
        client, clock, home = served
        key = _create_key(home, capsys)
        clock.now += 6
        foreign = {"Host": "fabric.example.com", "Origin": "https://console.example.com"}
        resp = await client.post(
            "/v1/search", json=SEARCH, headers={**foreign, "Authorization": f"Bearer {key['key']}"}
        )
        assert resp.status == 200
        assert (await client.post("/v1/search", json=SEARCH, headers=foreign)).status == 401
