"""The request guard over HTTP on loopback: keys, roles, open mode, per-tenant limits, metrics and headers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

import fabric.serve.auth as mod
from fabric.query.engine import Engine
from fabric.serve.auth import Guard, principal, required_role
from fabric.serve.keys.store import KeyStore, Role
from fabric.serve.limits.tenants import LimitConfig, TenantLimits, TenantMetrics
from fabric.serve.service import create_app
from fabric.settings import load_settings
from lanes.base import LaneResources
from lanes.fake import FakeLane

SEARCH = {"query": "rrf", "budget_ms": 300, "top_k": 3}


class Clock:
    """A settable monotonic clock shared by the guard's cache and the buckets."""

    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def _engine(home: Path) -> Engine:
    settings = load_settings(env={"FABRIC_HOME": str(home)})
    lanes = {"keyword": FakeLane(name="keyword", hits=5)}
    return Engine(settings, lanes=lanes, resources=LaneResources(home=home))


def _guard(engine: Engine, clock: Clock, limits: LimitConfig | None = None, *, open_allowed: bool = True) -> Guard:
    return Guard(
        KeyStore(engine.settings.home),
        TenantLimits(limits or LimitConfig(), clock=clock),
        TenantMetrics(engine.metrics.registry),
        clock=clock,
        open_allowed=open_allowed,
    )


async def _client(
    home: Path, clock: Clock, limits: LimitConfig | None = None, *, open_allowed: bool = True
) -> TestClient:
    engine = _engine(home)
    guard = _guard(engine, clock, limits, open_allowed=open_allowed)
    client = TestClient(TestServer(create_app(engine, guard=guard), host="127.0.0.1"))
    await client.start_server()
    return client


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, str]:
    """Keys of tenant acme (reader, writer, admin) and tenant beta (reader) in the home's real key store."""
    store = KeyStore(tmp_path)
    out = {role.label: store.create("acme", role)[1] for role in Role}
    out["beta"] = store.create("beta", Role.READER)[1]
    return out


@pytest.fixture
async def client(tmp_path: Path, keys: dict[str, str]) -> AsyncIterator[TestClient]:
    """A service over a fake lane whose home holds ``keys``."""
    c = await _client(tmp_path, Clock())
    yield c
    await c.close()


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


class TestAuthentication:
    async def test_missing_key_is_401_with_the_usual_body(self, client: TestClient) -> None:
        """No header: 401, WWW-Authenticate: Bearer, error naming authorization."""
        resp = await client.post("/v1/search", json=SEARCH)
        body = await resp.json()
        assert resp.status == 401
        assert resp.headers["WWW-Authenticate"].startswith("Bearer")
        assert body["error"]["field"] == "authorization"

    @pytest.mark.parametrize("header", ["Bearer nope", "Basic dXNlcjpwYXNz", "Bearer ", "fab_x"])
    async def test_bad_keys_are_401(self, client: TestClient, header: str) -> None:
        """Unknown keys and other schemes are refused."""
        resp = await client.get("/metrics", headers={"Authorization": header})
        assert resp.status == 401

    async def test_probes_stay_open(self, client: TestClient) -> None:
        """/healthz and /readyz answer without a key."""
        assert (await client.get("/healthz")).status == 200
        assert (await client.get("/readyz")).status in (200, 503)

    async def test_every_other_route_needs_a_key(self, client: TestClient) -> None:
        """Metrics, task status and unknown routes are guarded too (no route discovery without a key)."""
        for path in ("/metrics", "/v1/ingest/abc", "/nowhere"):
            assert (await client.get(path)).status == 401, path

    async def test_reader_searches(self, client: TestClient, keys: dict[str, str]) -> None:
        """A reader key searches."""
        resp = await client.post("/v1/search", json=SEARCH, headers=_auth(keys["reader"]))
        assert resp.status == 200

    async def test_reader_cannot_ingest(self, client: TestClient, keys: dict[str, str]) -> None:
        """A reader key posting to /v1/ingest is 403 naming the needed role."""
        entries = {"entries": [{"id": "a", "text": "t"}]}
        resp = await client.post("/v1/ingest", json=entries, headers=_auth(keys["reader"]))
        body = await resp.json()
        assert resp.status == 403
        assert "writer" in body["error"]["message"]

    async def test_revoked_key_stops_after_the_cache(self, tmp_path: Path, keys: dict[str, str]) -> None:
        """Revocation takes effect once the verified-key cache entry expires."""
        clock = Clock()
        client = await _client(tmp_path, clock)
        try:
            assert (await client.get("/metrics", headers=_auth(keys["beta"]))).status == 200
            key_id = keys["beta"].split("_")[1]
            assert KeyStore(tmp_path).revoke(key_id)
            clock.now += 6
            assert (await client.get("/metrics", headers=_auth(keys["beta"]))).status == 401
        finally:
            await client.close()


class TestOpenMode:
    async def test_no_keys_means_default_admin(self, tmp_path: Path) -> None:
        """With no key in the home every request is tenant default (today's loopback behaviour)."""
        client = await _client(tmp_path, Clock())
        try:
            assert (await client.post("/v1/search", json=SEARCH)).status == 200
            text = await (await client.get("/metrics")).text()
            assert 'fabric_tenant_requests_total{code="200",route="/v1/search",tenant="default"} 1.0' in text
        finally:
            await client.close()

    async def test_first_key_ends_open_mode(self, tmp_path: Path) -> None:
        """Creating a key while serving closes the service within the cache time."""
        clock = Clock()
        client = await _client(tmp_path, clock)
        try:
            assert (await client.get("/metrics")).status == 200
            KeyStore(tmp_path).create("acme", Role.READER)
            clock.now += 6
            assert (await client.get("/metrics")).status == 401
        finally:
            await client.close()

    @pytest.mark.parametrize("open_allowed", [True, False])
    async def test_revoking_the_last_key_locks(self, tmp_path: Path, open_allowed: bool) -> None:
        """Revoking every key refuses requests with 401 instead of opening the service as tenant default with the
        admin role, on a loopback address (open mode allowed) as on any other."""
        clock = Clock()
        store = KeyStore(tmp_path)
        record, token = store.create("acme", Role.ADMIN)
        client = await _client(tmp_path, clock, open_allowed=open_allowed)
        try:
            assert (await client.post("/v1/search", json=SEARCH, headers=_auth(token))).status == 200
            assert store.revoke(record.key_id)
            clock.now += 6
            resp = await client.post("/v1/search", json=SEARCH)
            assert resp.status == 401
            assert "the service is locked" in (await resp.json())["error"]["message"]
            assert (await client.post("/v1/search", json=SEARCH, headers=_auth(token))).status == 401
        finally:
            await client.close()

    async def test_a_closed_address_refuses_open_mode(self, tmp_path: Path) -> None:
        """Where open mode is not allowed (a non-loopback bind), a home without keys answers 401."""
        client = await _client(tmp_path, Clock(), open_allowed=False)
        try:
            resp = await client.post("/v1/search", json=SEARCH)
            assert resp.status == 401
            assert "refuses open mode" in (await resp.json())["error"]["message"]
        finally:
            await client.close()


class TestLimits:
    async def test_over_the_bucket_is_429_and_other_tenants_pass(self, tmp_path: Path, keys: dict[str, str]) -> None:
        """Past its burst a tenant gets 429 + Retry-After; another tenant is unaffected; metrics count both."""
        clock = Clock()
        client = await _client(tmp_path, clock, LimitConfig(rate=1.0, burst=3, concurrency=8))
        try:
            codes = [(await client.post("/v1/search", json=SEARCH, headers=_auth(keys["reader"]))).status
                     for _ in range(5)]  # fmt: skip
            assert codes == [200, 200, 200, 429, 429]
            resp = await client.post("/v1/search", json=SEARCH, headers=_auth(keys["reader"]))
            assert (resp.status, resp.headers["Retry-After"]) == (429, "1")
            assert (await resp.json())["error"]["limit"] == "rate"
            assert (await client.post("/v1/search", json=SEARCH, headers=_auth(keys["beta"]))).status == 200
            clock.now += 1.0
            assert (await client.post("/v1/search", json=SEARCH, headers=_auth(keys["reader"]))).status == 200
            text = await (await client.get("/metrics", headers=_auth(keys["beta"]))).text()
            assert 'fabric_tenant_rejections_total{reason="rate",tenant="acme"} 3.0' in text
            assert 'fabric_tenant_requests_total{code="200",route="/v1/search",tenant="acme"} 4.0' in text
            assert 'fabric_tenant_requests_total{code="200",route="/v1/search",tenant="beta"} 1.0' in text
        finally:
            await client.close()


class TestHeaders:
    async def test_no_markup_interpretation(self, client: TestClient, keys: dict[str, str]) -> None:
        """Answers are JSON with nosniff and a CSP forbidding active content, errors included."""
        for resp in (
            await client.post("/v1/search", json=SEARCH, headers=_auth(keys["reader"])),
            await client.post("/v1/search", json=SEARCH),
            await client.get("/healthz"),
        ):
            assert resp.content_type == "application/json"
            assert resp.headers["X-Content-Type-Options"] == "nosniff"
            assert "default-src 'none'" in resp.headers["Content-Security-Policy"]


class TestRoutes:
    @pytest.mark.parametrize(
        ("method", "path", "role"),
        [("GET", "/metrics", Role.READER), ("POST", "/v1/search", Role.READER), ("POST", "/v1/ingest", Role.WRITER),
         ("DELETE", "/v1/entries/x", Role.WRITER), ("POST", "/mcp", Role.READER), ("POST", "/mcpx", Role.WRITER)],
    )  # fmt: skip
    def test_required_role(self, method: str, path: str, role: Role) -> None:
        """Reads need reader, mutations writer, except the read-only POST routes."""
        assert required_role(method, path) is role

    async def test_a_route_added_later_is_guarded(self, tmp_path: Path, keys: dict[str, str]) -> None:
        """A sub-application mounted after create_app (e.g. /mcp) goes through the guard and sees the caller."""
        engine = _engine(tmp_path)
        app = create_app(engine, guard=_guard(engine, Clock()))

        async def who(request: web.Request) -> web.Response:
            p = principal(request)
            return web.json_response({"tenant": p.tenant, "role": p.role.label})

        sub = web.Application()
        sub.router.add_post("/", who)
        app.add_subapp("/mcp", sub)
        client = TestClient(TestServer(app, host="127.0.0.1"))
        await client.start_server()
        try:
            assert (await client.post("/mcp/")).status == 401
            resp = await client.post("/mcp/", headers=_auth(keys["writer"]))
            assert await resp.json() == {"tenant": "acme", "role": "writer"}
        finally:
            await client.close()


def test_public_api() -> None:
    """The module exports the guard, its middleware and helpers."""
    assert {"Guard", "guard_middleware", "install_guard", "principal", "require", "GUARD_KEY"} <= set(mod.__all__)
