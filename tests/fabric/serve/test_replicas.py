"""Two replicas of the service behind one address, sharing one home and one state: a real PostgreSQL database, or
a local folder of SQLite files and file locks (``sqlite:///<folder>``, what ``fabric serve --workers`` uses). Each
is a full app on its own loopback port (real HTTP), built as ``fabric serve`` builds it with ``FABRIC_STATE_URL``.

Tasks submitted through one are polled through the other; an API key revoked through one is refused by the other;
a cursor minted by one pages on the other; a tenant's rate is its total however its requests are spread.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

import fabric.serve.replicas as mod
from fabric.query.engine import Engine
from fabric.serve.auth import Guard
from fabric.serve.keys.store import Role
from fabric.serve.limits.tenants import LimitConfig, TenantLimits, TenantMetrics
from fabric.serve.replicas import Replica, default_guard, ingest_tasks
from fabric.serve.service import TASKS_KEY, create_app
from fabric.serve.tasks.shared import SharedIngestTasks
from fabric.settings import load_settings
from lanes.base import LaneResources
from tests.support.embedded import BagEmbedder

_LIMITS = LimitConfig(rate=4.0, burst=8, concurrency=64)
"""The low limits of the rate test."""


def _replica_app(home: Path, state_url: str, limits: LimitConfig) -> Any:
    env = {
        "FABRIC_HOME": str(home), "FABRIC_STATE_URL": state_url, "FABRIC__ingest__sync_max_entries": "0",
        "FABRIC__ingest__replica_poll_s": "0.05",
    }  # fmt: skip
    settings = load_settings(env=env)
    engine = Engine(settings, resources=LaneResources(home=home, embedder=BagEmbedder()))
    replica = Replica(state_url, home)
    tenant_limits = TenantLimits(limits, shared=replica.buckets)
    guard = Guard(replica.keys, tenant_limits, TenantMetrics(engine.metrics.registry), cache_seconds=0.0)
    return create_app(engine, guard=guard, replica=replica), replica


@pytest.fixture(params=["postgres", "sqlite"])
def any_state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh PostgreSQL database, or a local state folder."""
    if request.param == "postgres":
        return str(request.getfixturevalue("state_url"))
    return f"sqlite://{tmp_path / 'replicas'}"


@pytest.fixture
async def pair(
    any_state_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[TestClient, TestClient, Replica, str]]:
    """Replicas A and B (clients), A's replica handle, and a writer key of tenant ``acme``; the limits are the
    fixture's parameter (indirect), else high."""
    state_url = any_state_url
    limits = getattr(request, "param", None) or LimitConfig(rate=10_000.0, burst=10_000, concurrency=256)
    (app_a, replica_a), (app_b, _) = (_replica_app(tmp_path / "home", state_url, limits) for _ in range(2))
    replica_a.state.open_sync()
    _, token = replica_a.keys.create("acme", Role.WRITER)
    async with (
        TestClient(TestServer(app_a, host="127.0.0.1")) as a,
        TestClient(TestServer(app_b, host="127.0.0.1")) as b,
    ):
        yield a, b, replica_a, token


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _entries(n: int) -> list[dict[str, str]]:
    return [
        {"id": f"kb-{i}", "title": f"Release {i}", "text": f"Blue-green deploys for release {i}."} for i in range(n)
    ]


async def _finished(client: TestClient, task_id: str, token: str) -> dict[str, Any]:
    for _ in range(4000):
        resp = await client.get(f"/v1/ingest/{task_id}", headers=_auth(token))
        body: dict[str, Any] = await resp.json()
        if resp.status == 200 and body["status"] in ("succeeded", "failed"):
            return body
        await asyncio.sleep(0.01)
    raise AssertionError(f"task {task_id} did not finish: {body}")


class TestTwoReplicas:
    async def test_ingest_on_a_poll_and_search_on_b_then_cursor_crosses(
        self, pair: tuple[TestClient, TestClient, Replica, str]
    ) -> None:
        """A task submitted to A is known to B at once, finishes (once), and B then finds the entries; a cursor
        minted by A pages on B, and one minted by B on A."""
        a, b, _, token = pair
        resp = await a.post("/v1/ingest", json={"entries": _entries(12)}, headers=_auth(token))
        assert resp.status == 202, await resp.text()
        task_id = (await resp.json())["task_id"]
        seen = await b.get(f"/v1/ingest/{task_id}", headers=_auth(token))
        assert seen.status == 200
        done = await _finished(b, task_id, token)
        assert (done["status"], done["attempts"], done["report"]["docs"]) == ("succeeded", 1, 12)
        query = {"query": "blue-green release", "top_k": 3, "lanes": ["keyword"]}
        first = await (await a.post("/v1/search", json=query, headers=_auth(token))).json()
        assert first["next_cursor"], first
        page = await b.post("/v1/search", json={**query, "cursor": first["next_cursor"]}, headers=_auth(token))
        assert page.status == 200, await page.text()
        second = await page.json()
        ids = [i["id"] for i in first["items"]] + [i["id"] for i in second["items"]]
        assert len(ids) == len(set(ids)) == 6
        back = await a.post("/v1/search", json={**query, "cursor": second["next_cursor"]}, headers=_auth(token))
        assert back.status == 200, await back.text()

    async def test_idempotency_key_is_one_task_across_replicas(
        self, pair: tuple[TestClient, TestClient, Replica, str]
    ) -> None:
        """One Idempotency-Key sent to A and to B names one task."""
        a, b, _, token = pair
        headers = {**_auth(token), "Idempotency-Key": "batch-7"}
        ra, rb = await asyncio.gather(
            a.post("/v1/ingest", json={"entries": _entries(2)}, headers=headers),
            b.post("/v1/ingest", json={"entries": _entries(2)}, headers=headers),
        )
        ja, jb = await ra.json(), await rb.json()
        assert ja["task_id"] == jb["task_id"]
        assert sorted([ja["created"], jb["created"]]) == [False, True]

    async def test_key_revoked_through_a_is_refused_by_b(
        self, pair: tuple[TestClient, TestClient, Replica, str]
    ) -> None:
        """B accepts the key, A's key store revokes it, B refuses it (401) on the next request (another key stays
        active: with none left the service would be in open mode)."""
        _, b, replica_a, token = pair
        await asyncio.to_thread(replica_a.keys.create, "ops", Role.READER)
        assert (await b.get("/v1/ingest/none", headers=_auth(token))).status == 404
        key_id = token.split("_")[1]
        assert await asyncio.to_thread(replica_a.keys.revoke, key_id)
        refused = await b.get("/v1/ingest/none", headers=_auth(token))
        assert refused.status == 401
        assert "revoked" in (await refused.json())["error"]["message"]

    @pytest.mark.parametrize("pair", [_LIMITS], indirect=True)
    async def test_rate_is_the_tenants_total_over_both_replicas(
        self, pair: tuple[TestClient, TestClient, Replica, str]
    ) -> None:
        """60 requests spread over A and B at once: about burst + rate x elapsed are admitted in total (one
        replica's own buckets would admit twice the burst), the others get 429 with Retry-After."""
        a, b, _, token = pair
        started = time.monotonic()
        resps = await asyncio.gather(*((a, b)[i % 2].get("/v1/ingest/none", headers=_auth(token)) for i in range(60)))
        elapsed = time.monotonic() - started
        admitted = sum(1 for r in resps if r.status == 404)
        limited = [r for r in resps if r.status == 429]
        assert admitted + len(limited) == 60
        assert _LIMITS.burst <= admitted <= _LIMITS.burst + _LIMITS.rate * elapsed + 1, (admitted, elapsed)
        assert admitted < 2 * _LIMITS.burst
        assert all(int(r.headers["Retry-After"]) >= 1 for r in limited)
        assert {r.status for r in resps} == {404, 429}


async def test_without_state_url_the_embedded_backends_are_used(tmp_path: Path) -> None:
    """No FABRIC_STATE_URL: no replica, the home's key store and task queue."""
    engine = Engine(load_settings(env={"FABRIC_HOME": str(tmp_path)}))
    assert Replica.of(engine) is None
    assert not isinstance(ingest_tasks(engine), SharedIngestTasks)
    assert default_guard(engine).limits.shared is None


async def test_with_state_url_the_app_shares_its_queue(tmp_path: Path, any_state_url: str) -> None:
    """With FABRIC_STATE_URL, create_app builds the replica's shared queue by itself."""
    env = {"FABRIC_HOME": str(tmp_path), "FABRIC_STATE_URL": any_state_url}
    app = create_app(Engine(load_settings(env=env)))
    assert isinstance(app[TASKS_KEY], SharedIngestTasks)


def test_public_api() -> None:
    """The module exports the replica and the service's state helpers."""
    assert set(mod.__all__) == {"Replica", "default_guard", "ingest_tasks", "key_store", "store_runner", "tenant_tasks"}
