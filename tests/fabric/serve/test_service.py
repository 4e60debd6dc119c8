"""The HTTP service on loopback (aiohttp test client) with an engine over fake lanes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

import fabric.serve.service as mod
from fabric.core.errors import LaneUnavailable
from fabric.core.models import LaneKind
from fabric.query.engine import Engine
from fabric.serve.service import create_app
from fabric.settings import load_settings
from lanes.base import LaneResources
from lanes.fake import FakeLane


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[TestClient]:
    """A client for an app whose engine has a good keyword lane, a hung lane and a failing lane."""
    settings = load_settings(env={"FABRIC_HOME": str(tmp_path)})
    lanes = {
        "keyword": FakeLane(name="keyword", hits=5),
        "vector": FakeLane(name="vector", kind=LaneKind.VECTOR, hang=True),
        "graph": FakeLane(name="graph", kind=LaneKind.GRAPH, error=LaneUnavailable("down")),
    }
    engine = Engine(settings, lanes=lanes, resources=LaneResources(home=tmp_path))
    async with TestClient(TestServer(create_app(engine), host="127.0.0.1")) as c:
        yield c


class TestSearchEndpoint:
    async def test_a_huge_integer_is_a_400(self, client: TestClient) -> None:
        """An integer of 5,000 digits anywhere in the body is bad input (400), never a 500."""
        body = b'{"query": "rrf", "top_k": ' + b"9" * 5000 + b"}"
        resp = await client.post("/v1/search", data=body, headers={"Content-Type": "application/json"})
        assert resp.status == 400
        assert "a number of 5000 digits" in (await resp.json())["error"]["message"]

    async def test_an_empty_answer_over_an_empty_tenant_says_so(self, tmp_path: Path) -> None:
        """A search of a tenant with nothing ingested answers its empty page with a notice saying why."""
        settings = load_settings(env={"FABRIC_HOME": str(tmp_path)})
        lanes = {"keyword": FakeLane(name="keyword", hits=0)}
        engine = Engine(settings, lanes=lanes, resources=LaneResources(home=tmp_path))
        async with TestClient(TestServer(create_app(engine), host="127.0.0.1")) as c:
            body = await (await c.post("/v1/search", json={"query": "rrf", "lanes": ["keyword"]})).json()
        assert body["items"] == []
        assert "tenant 'default' has no ingested documents yet" in body["notice"]

    async def test_answers_design_shape(self, client: TestClient) -> None:
        """POST /v1/search answers the DESIGN.md result shape with per-lane outcomes."""
        resp = await client.post("/v1/search", json={"query": "rrf", "budget_ms": 300, "top_k": 3})
        body = await resp.json()
        assert resp.status == 200
        assert {
            "query",
            "mode",
            "trace_id",
            "items",
            "next_cursor",
            "lanes",
            "preflight",
            "dedup",
            "timings",
            "receipt",
        } <= set(body)
        assert len(body["items"]) == 3
        assert body["lanes"]["vector"]["status"] in ("timeout", "fallback")
        assert body["lanes"]["keyword"]["status"] == "success"

    async def test_validation_error_is_400_naming_field(self, client: TestClient) -> None:
        """A bad field answers 400 with error.field and error.message, no traceback."""
        resp = await client.post("/v1/search", json={"query": "x", "top_k": -1})
        body = await resp.json()
        assert (resp.status, body["error"]["field"]) == (400, "top_k")
        assert "Traceback" not in await resp.text()

    async def test_missing_query(self, client: TestClient) -> None:
        """A body without query names the field."""
        resp = await client.post("/v1/search", json={"mode": "simple"})
        assert (resp.status, (await resp.json())["error"]["field"]) == (400, "query")

    async def test_invalid_json(self, client: TestClient) -> None:
        """Malformed JSON answers 400 on field body."""
        resp = await client.post("/v1/search", data=b"{nope", headers={"Content-Type": "application/json"})
        assert (resp.status, (await resp.json())["error"]["field"]) == (400, "body")

    async def test_non_object_body(self, client: TestClient) -> None:
        """A JSON array is refused."""
        resp = await client.post("/v1/search", json=["query"])
        assert resp.status == 400

    async def test_wrong_content_type(self, client: TestClient) -> None:
        """A form body answers 415."""
        resp = await client.post("/v1/search", data="query=x")
        assert resp.status == 415

    async def test_oversized_body(self, client: TestClient) -> None:
        """A body over the cap answers a JSON 413."""
        resp = await client.post("/v1/search", data=b"x" * 70_000, headers={"Content-Type": "application/json"})
        assert (resp.status, (await resp.json())["error"]["field"]) == (413, "body")

    async def test_strict_partial_is_503(self, client: TestClient) -> None:
        """strict with a failing lane answers 503 listing the lanes."""
        resp = await client.post("/v1/search", json={"query": "x", "strict": True, "budget_ms": 200})
        body = await resp.json()
        assert (resp.status, body["error"]["field"]) == (503, "strict")

    async def test_unknown_route_json_404(self, client: TestClient) -> None:
        """Unknown paths answer a JSON 404."""
        resp = await client.get("/v2/nothing")
        assert (resp.status, "error" in await resp.json()) == (404, True)


class TestHostileBodies:
    """Bodies an attacker would send: each a clear 400 naming the field, never a 500 or a traceback."""

    @pytest.mark.parametrize(
        ("body", "field", "words"),
        [
            (b'{"query": ' + b"[" * 1000 + b"]" * 1000 + b"}", "body", "nested too deeply"),  # 2 KiB, 1,000 deep
            (b'{"query": "x", "constraints": ' + b'{"a":' * 100 + b"1" + b"}" * 101, "constraints", "deeper than 64"),
            (b'{"query": "bad \\ud800 query"}', "query", "lone surrogate"),
            (b'{"query": "x", "budget_ms": NaN}', "body", "NaN"),
            (b'{"query": "x", "\\udc00": 1}', "<key>", "lone surrogate"),
        ],
    )
    async def test_refused_with_400(self, client: TestClient, body: bytes, field: str, words: str) -> None:
        """Deep nesting, lone surrogates (values and keys) and NaN answer 400 naming the field."""
        resp = await client.post("/v1/search", data=body, headers={"Content-Type": "application/json"})
        text = await resp.text()
        assert resp.status == 400, text
        error = (await resp.json())["error"]
        assert field in error["field"]
        assert words in error["message"]
        assert "Traceback" not in text

    @pytest.mark.parametrize("change", [{"budget_ms": 900}, {"preflight": False}])
    async def test_cursor_bound_to_budget_and_preflight(self, client: TestClient, change: dict[str, object]) -> None:
        """A cursor is bound to budget_ms and preflight: toggling either between pages is refused, not shifted."""
        first = {"query": "rrf", "budget_ms": 300, "top_k": 2, "lanes": ["keyword"], "preflight": True}
        page = await (await client.post("/v1/search", json=first)).json()
        assert page["next_cursor"]
        same = await client.post("/v1/search", json={**first, "cursor": page["next_cursor"]})
        assert same.status == 200
        resp = await client.post("/v1/search", json={**first, **change, "cursor": page["next_cursor"]})
        assert (resp.status, (await resp.json())["error"]["field"]) == (409, "cursor")  # well-formed, not this query's


class TestOpsEndpoints:
    async def test_healthz(self, client: TestClient) -> None:
        """/healthz answers ok."""
        resp = await client.get("/healthz")
        assert (resp.status, await resp.json()) == (200, {"status": "ok"})

    async def test_readyz(self, client: TestClient) -> None:
        """/readyz is ready once the engine is open with lanes."""
        resp = await client.get("/readyz")
        body = await resp.json()
        assert (resp.status, body["status"], sorted(body["lanes"])) == (200, "ready", ["graph", "keyword", "vector"])

    async def test_readyz_waits_for_a_warming_lane(self, tmp_path: Path) -> None:
        """A lane that is still warming (the keyword lane reading its in-memory postings) keeps /readyz at 503,
        and says so in its health; once it is warm the service is ready."""
        settings = load_settings(env={"FABRIC_HOME": str(tmp_path)})
        keyword = FakeLane(name="keyword", hits=5)
        warm = [False]
        keyword.warming = lambda: not warm[0]  # type: ignore[attr-defined]
        engine = Engine(settings, lanes={"keyword": keyword}, resources=LaneResources(home=tmp_path))
        async with TestClient(TestServer(create_app(engine), host="127.0.0.1")) as c:
            resp = await c.get("/readyz")
            body = await resp.json()
            assert (resp.status, body["status"], body["lanes"]["keyword"]["warming"]) == (503, "not_ready", True)
            assert (await c.post("/v1/search", json={"query": "x"})).status == 200  # it answers meanwhile
            warm[0] = True
            resp = await c.get("/readyz")
            body = await resp.json()
            assert (resp.status, body["status"], body["lanes"]["keyword"]["warming"]) == (200, "ready", False)

    async def test_readyz_of_a_worker_waits_for_every_worker(self, tmp_path: Path) -> None:
        """With ``--workers``, /readyz of a ready worker stays 503 while a sibling is not ready (warming on its
        socket) or not there at all (starting), naming it; 200 once every worker answers ready."""
        from prometheus_client import CollectorRegistry

        from fabric.serve.worker_metrics import WORKERS_KEY, WorkerSet, serve_own

        settings = load_settings(env={"FABRIC_HOME": str(tmp_path / "home")})
        engine = Engine(settings, lanes={"keyword": FakeLane(name="keyword", hits=5)}, resources=LaneResources())
        folder = tmp_path / "socks"
        folder.mkdir()
        app = create_app(engine)
        app[WORKERS_KEY] = WorkerSet(folder, 0, 3)
        warm = [False]

        async def sibling_ready() -> bool:
            return warm[0]

        async with TestClient(TestServer(app, host="127.0.0.1")) as c:
            one = await serve_own(WorkerSet(folder, 1, 3), CollectorRegistry(), sibling_ready)
            try:
                resp = await c.get("/readyz")
                body = await resp.json()
                assert (resp.status, body["status"]) == (503, "not_ready")
                assert body["workers"] == {"count": 3, "this": 0, "not_ready": [1, 2]}
                warm[0] = True
                body = await (await c.get("/readyz")).json()
                assert body["workers"]["not_ready"] == [2]  # worker 2 has no socket yet
                two = await serve_own(WorkerSet(folder, 2, 3), CollectorRegistry(), sibling_ready)
                try:
                    resp = await c.get("/readyz")
                    body = await resp.json()
                    assert (resp.status, body["status"], body["workers"]["not_ready"]) == (200, "ready", [])
                finally:
                    await two.cleanup()
            finally:
                await one.cleanup()

    async def test_metrics_prometheus_text(self, client: TestClient) -> None:
        """/metrics is Prometheus text including query counters after a search."""
        await client.post("/v1/search", json={"query": "x", "budget_ms": 200})
        resp = await client.get("/metrics")
        text = await resp.text()
        assert resp.headers["Content-Type"].startswith("text/plain")
        assert "fabric_queries_total 1.0" in text


def test_public_api() -> None:
    """The module exports the app factory, the app keys, the default guard, the task factory and the error shape."""
    assert set(mod.__all__) == {
        "ENGINE_KEY",
        "GATE_KEY",
        "LOOP_LAG_KEY",
        "TASKS_KEY",
        "create_app",
        "default_guard",
        "error_body",
        "ingest_tasks",
        "own_readiness",
        "store_runner",
    }
