"""Tests for admission control: the bounded queue, fast refusals with Retry-After, and a burst on a real service."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from prometheus_client import CollectorRegistry

import fabric.serve.limits.admission as mod
from fabric.serve.limits.admission import ADMISSION_KEY, AdmissionConfig, AdmissionControl, Overloaded, default_config
from fabric.serve.service import create_app
from tests.support.ingested import engine, ingested_home


def _value(registry: CollectorRegistry, name: str, labels: dict[str, str] | None = None) -> float:
    return registry.get_sample_value(name, labels or {}) or 0.0


class TestConfig:
    def test_defaults_come_from_the_cores(self) -> None:
        """2 running queries per core and a queue twice that."""
        cfg = AdmissionConfig().resolved(cores=2)
        assert (cfg.max_active, cfg.max_queue, cfg.max_wait_ms) == (4, 8, 100.0)
        assert default_config().max_active >= 2
        worker = AdmissionConfig().resolved(cores=1, per_core=mod.WORKER_ACTIVE_PER_CORE)
        assert (worker.max_active, worker.max_queue) == (3, 6)  # per_core replaces the 2 of one process

    def test_explicit_limits_are_kept(self) -> None:
        """Given limits are not replaced by the derived ones."""
        assert AdmissionConfig(max_active=3, max_queue=1).resolved(cores=64) == AdmissionConfig(3, 1)

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"max_active": -1}, "max_active"),
            ({"max_queue": -2}, "max_queue"),
            ({"max_wait_ms": -1.0}, "max_wait_ms"),
            ({"retry_after_s": 0}, "retry_after_s"),
        ],
    )
    def test_bad_values_are_refused(self, kwargs: dict[str, Any], match: str) -> None:
        """Negative limits, a negative wait and a Retry-After below 1 s are configuration errors."""
        with pytest.raises(ValueError, match=match):
            AdmissionConfig(**kwargs)


async def _hold(control: AdmissionControl, release: asyncio.Event) -> None:
    async with control.slot():
        await release.wait()


async def _until(check: Any) -> None:
    """Let the loop run until ``check()`` holds (fails rather than hangs if it never does)."""
    for _ in range(20_000):
        if check():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the awaited state was never reached")


class TestAdmissionControl:
    async def test_beyond_running_and_queued_requests_are_refused_at_once(self) -> None:
        """With every slot taken and the queue full, the next request fails fast with queue_full."""
        registry = CollectorRegistry()
        control = AdmissionControl(AdmissionConfig(max_active=1, max_queue=1, max_wait_ms=60_000), registry)
        release = asyncio.Event()
        held = asyncio.ensure_future(_hold(control, release))
        queued = asyncio.ensure_future(_hold(control, release))
        await _until(lambda: control.queued == 1)
        with pytest.raises(Overloaded) as info:
            async with control.slot():
                pass
        assert (info.value.reason, info.value.retry_after_s) == ("queue_full", 1)
        release.set()
        await asyncio.gather(held, queued)
        assert (control.active, control.queued) == (0, 0)
        assert _value(registry, "fabric_admission_admitted_total") == 2
        assert _value(registry, "fabric_admission_rejected_total", {"reason": "queue_full"}) == 1
        assert _value(registry, "fabric_admission_queue_wait_seconds_count") == 2

    async def test_a_wait_past_max_wait_is_refused(self) -> None:
        """A queued request whose wait runs out gets queue_timeout and leaves the queue."""
        registry = CollectorRegistry()
        control = AdmissionControl(AdmissionConfig(max_active=1, max_queue=4, max_wait_ms=0.0), registry)
        release = asyncio.Event()
        held = asyncio.ensure_future(_hold(control, release))
        await _until(lambda: control.active == 1)
        with pytest.raises(Overloaded) as info:
            async with control.slot():
                pass
        assert info.value.reason == "queue_timeout"
        assert control.queued == 0
        release.set()
        await held
        assert _value(registry, "fabric_admission_rejected_total", {"reason": "queue_timeout"}) == 1

    async def test_once_waits_time_out_a_request_that_cannot_get_a_slot_in_time_is_refused_on_arrival(self) -> None:
        """A busy service's one slot frees every 30 s of the test's clock. Before any timeout, a request queues
        (and runs out of its 50 ms). From then on, for SHED_WINDOW_S, a request whose place times the pace is
        past max_wait is refused at once with expected_wait; after the window it queues again."""
        now = [0.0]
        registry = CollectorRegistry()
        control = AdmissionControl(
            AdmissionConfig(max_active=1, max_queue=8, max_wait_ms=50), registry, clock=lambda: now[0]
        )
        assert control.expected_wait_s(1) is None
        for _ in range(10):
            async with control.slot():
                now[0] += 30.0
        assert control.expected_wait_s(4) == pytest.approx(120.0)
        release = asyncio.Event()
        held = asyncio.ensure_future(_hold(control, release))
        await _until(lambda: control.active == 1)
        reasons = []
        for _ in range(2):
            with pytest.raises(Overloaded) as info:
                async with control.slot():
                    pass
            reasons.append(info.value.reason)
        assert reasons == ["queue_timeout", "expected_wait"]
        now[0] += mod.SHED_WINDOW_S + 0.1  # no timeout for a while: requests queue again
        with pytest.raises(Overloaded) as info:
            async with control.slot():
                pass
        assert info.value.reason == "queue_timeout"
        release.set()
        await held
        assert (control.active, control.queued) == (0, 0)
        assert _value(registry, "fabric_admission_rejected_total", {"reason": "expected_wait"}) == 1
        assert _value(registry, "fabric_admission_rejected_total", {"reason": "queue_timeout"}) == 2

    async def test_no_recent_busy_pace_means_requests_queue_as_before(self) -> None:
        """A pace older than PACE_MAX_AGE_S, or releases that left a slot free, predict nothing."""
        now = [0.0]
        control = AdmissionControl(AdmissionConfig(max_active=2, max_queue=8, max_wait_ms=100), clock=lambda: now[0])
        for _ in range(20):  # one request at a time: a slot was always free
            async with control.slot():
                now[0] += 1.0
        assert control.expected_wait_s(1) is None
        busy = AdmissionControl(AdmissionConfig(max_active=1, max_queue=8, max_wait_ms=100), clock=lambda: now[0])
        for _ in range(10):
            async with busy.slot():
                now[0] += 1.0
        assert busy.expected_wait_s(1) == pytest.approx(1.0)
        now[0] += mod.PACE_MAX_AGE_S + 0.5
        assert busy.expected_wait_s(1) is None

    async def test_slots_go_to_waiters_first_come_first_served(self) -> None:
        """A freed slot goes to the longest waiter, never to a newcomer."""
        control = AdmissionControl(AdmissionConfig(max_active=1, max_queue=3, max_wait_ms=60_000))
        order: list[int] = []

        async def one(i: int, gate: asyncio.Event) -> None:
            async with control.slot():
                order.append(i)
                await gate.wait()

        gate = asyncio.Event()
        tasks = [asyncio.ensure_future(one(0, gate))]
        await _until(lambda: control.active == 1)
        for i in (1, 2, 3):
            tasks.append(asyncio.ensure_future(one(i, gate)))
            await _until(lambda i=i: control.queued == i)
        gate.set()
        await asyncio.gather(*tasks)
        assert order == [0, 1, 2, 3]
        assert (control.active, control.queued) == (0, 0)

    async def test_a_cancelled_waiter_leaves_no_slot_behind(self) -> None:
        """A client that goes away while queued frees its place; the slot count stays right."""
        control = AdmissionControl(AdmissionConfig(max_active=1, max_queue=2, max_wait_ms=60_000))
        release = asyncio.Event()
        held = asyncio.ensure_future(_hold(control, release))
        await _until(lambda: control.active == 1)
        gone = asyncio.ensure_future(_hold(control, release))
        await _until(lambda: control.queued == 1)
        gone.cancel()
        await asyncio.gather(gone, return_exceptions=True)
        assert control.queued == 0
        release.set()
        await held
        assert control.active == 0
        async with control.slot():
            assert control.active == 1


class TestHandBack:
    async def test_a_busy_process_closes_the_connection_of_what_it_answers(self) -> None:
        """With hand_back, a refusal and an answer sent while a request waits close their connection; an answer
        with nobody waiting keeps it; without hand_back nothing is closed."""
        registry = CollectorRegistry()
        control = AdmissionControl(AdmissionConfig(max_active=1, max_queue=2, hand_back=True), registry)
        quiet = AdmissionControl(AdmissionConfig(max_active=1, max_queue=2), CollectorRegistry())
        assert control.hand_back(web.json_response({})).keep_alive is None  # nobody waits: aiohttp decides
        assert quiet.hand_back(web.json_response({}), refused=True).keep_alive is None
        assert control.hand_back(web.json_response({}), refused=True).keep_alive is False
        release = asyncio.Event()
        held = asyncio.ensure_future(_hold(control, release))
        queued = asyncio.ensure_future(_hold(control, release))
        await _until(lambda: control.queued == 1)
        assert control.hand_back(web.json_response({})).keep_alive is False
        release.set()
        await asyncio.gather(held, queued)
        assert control.hand_back(web.json_response({})).keep_alive is None
        assert _value(registry, "fabric_admission_connections_handed_back_total") == 2

    def test_resolving_the_defaults_keeps_it(self) -> None:
        """The derived limits carry hand_back over."""
        assert AdmissionConfig(hand_back=True).resolved(cores=2).hand_back


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home with the test entries in the embedded stores (ingested on a loop of its own)."""
    return ingested_home(tmp_path)


@pytest.fixture
async def service(home: Path) -> AsyncIterator[tuple[str, AdmissionControl, Any]]:
    """A real service on loopback over the embedded stores (SQLite FTS5, flat vectors, SQLite graph)."""
    eng = engine(home)
    app = create_app(eng, mcp=False, admission=AdmissionConfig(max_active=2, max_queue=2, max_wait_ms=60_000))
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield f"http://127.0.0.1:{server.port}", app[ADMISSION_KEY], eng
    finally:
        await server.close()


async def _search(client: aiohttp.ClientSession, base: str, i: int) -> tuple[int, dict[str, Any], str | None]:
    async with client.post(f"{base}/v1/search", json={"query": f"deployment release {i}", "top_k": 5}) as resp:
        return resp.status, await resp.json(), resp.headers.get("Retry-After")


class TestServiceBurst:
    async def test_a_burst_beyond_capacity_is_shed_and_the_stores_stay_healthy(
        self, service: tuple[str, AdmissionControl, Any]
    ) -> None:
        """With both slots busy, 2 requests queue and the other 38 get 503 + Retry-After at once; the queued
        ones then succeed on every lane, and afterwards no store is suspended and a new query succeeds."""
        base, control, eng = service
        release = asyncio.Event()
        holders = [asyncio.ensure_future(_hold(control, release)) for _ in range(2)]
        await _until(lambda: control.active == 2)
        async with aiohttp.ClientSession() as client:
            burst = [asyncio.ensure_future(_search(client, base, i)) for i in range(40)]
            await _until(lambda: sum(t.done() for t in burst) == 38 and control.queued == 2)
            release.set()
            answers = await asyncio.gather(*burst)
            await asyncio.gather(*holders)
            refused = [a for a in answers if a[0] == 503]
            served = [a for a in answers if a[0] == 200]
            assert (len(refused), len(served)) == (38, 2)
            assert {(a[2], a[1]["error"]["reason"]) for a in refused} == {("1", "queue_full")}
            for _, body, _ in served:
                assert {lane["status"] for lane in body["lanes"].values()} == {"success"}
            status, body, _ = await _search(client, base, 99)
            assert status == 200
            assert {lane["status"] for lane in body["lanes"].values()} == {"success"}
            async with client.get(f"{base}/readyz") as resp:
                ready = await resp.json()
        assert {lane["health"]["state"] for lane in ready["lanes"].values()} == {"closed"}
        assert not any(eng.penalties.is_suspended(lane.provider) for lane in eng.lanes.values())

    async def test_a_real_overload_keeps_every_store_closed(self, service: tuple[str, AdmissionControl, Any]) -> None:
        """60 concurrent searches on 2 slots: every answer is 200 or a fast 503 with Retry-After, every served
        answer has all lanes successful, and no store's circuit opened."""
        base, control, eng = service
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as client:
            answers = await asyncio.gather(*(_search(client, base, i) for i in range(60)))
            assert {a[0] for a in answers} <= {200, 503}
            assert all(a[2] == "1" for a in answers if a[0] == 503)
            for status, body, _ in answers:
                if status == 200:
                    assert {lane["status"] for lane in body["lanes"].values()} == {"success"}
            assert (await _search(client, base, 0))[0] == 200
        assert (control.active, control.queued) == (0, 0)
        assert not any(eng.penalties.is_suspended(lane.provider) for lane in eng.lanes.values())


async def test_a_worker_hands_back_the_connection_it_refused_on(home: Path) -> None:
    """Over real HTTP: a worker's (hand_back) refusal says ``Connection: close`` and the client's next request
    comes on a new connection; an answer with nobody waiting keeps the connection for the next request."""
    eng = engine(home)
    app = create_app(eng, mcp=False, admission=AdmissionConfig(max_active=1, max_queue=1, hand_back=True))
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    base = f"http://127.0.0.1:{server.port}"
    control = app[ADMISSION_KEY]
    events: list[str] = []
    trace = aiohttp.TraceConfig()

    async def created(*_: Any) -> None:
        events.append("new")

    async def reused(*_: Any) -> None:
        events.append("reused")

    trace.on_connection_create_end.append(created)
    trace.on_connection_reuseconn.append(reused)
    body = {"query": "deployment release", "top_k": 3}
    try:
        async with aiohttp.ClientSession(trace_configs=[trace]) as client:
            for _ in range(2):
                async with client.post(f"{base}/v1/search", json=body) as resp:
                    assert resp.status == 200
                    assert resp.headers.get("Connection", "").lower() != "close"
            release = asyncio.Event()
            holders = [asyncio.ensure_future(_hold(control, release)) for _ in range(2)]
            await _until(lambda: control.active == 1 and control.queued == 1)
            async with client.post(f"{base}/v1/search", json=body) as resp:
                assert resp.status == 503
                assert resp.headers["Connection"].lower() == "close"
                assert resp.headers["Retry-After"] == "1"
            release.set()
            await asyncio.gather(*holders)
            async with client.post(f"{base}/v1/search", json=body) as resp:
                assert resp.status == 200
        assert events == ["new", "reused", "reused", "new"]
    finally:
        await server.close()


async def test_mcp_query_tool_is_admitted_like_the_search_route(home: Path) -> None:
    """Over ``/mcp`` the ``query`` tool takes an admission slot: with the only slot busy it is a tool error naming
    why it was shed (``queue_full``, or ``queue_timeout`` after 1 ms queued), and once the slot is free it answers."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    eng = engine(home)
    app = create_app(eng, admission=AdmissionConfig(max_active=1, max_queue=0, max_wait_ms=1))
    control = app[ADMISSION_KEY]
    async with TestServer(app, host="127.0.0.1") as server:
        url = str(server.make_url("/mcp"))
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            release = asyncio.Event()
            holder = asyncio.ensure_future(_hold(control, release))
            await _until(lambda: control.active == 1)
            refused = await session.call_tool("query", {"topic": "deployment release", "limit": 3})
            release.set()
            await holder
            served = await session.call_tool("query", {"topic": "deployment release", "limit": 3})
    assert refused.is_error
    assert json.loads(refused.content[0].text)["error"]["reason"] in {"queue_full", "queue_timeout"}
    assert not served.is_error, served
    assert control.active == 0


def test_public_api() -> None:
    """The module's public names."""
    assert sorted(mod.__all__) == sorted(
        [
            "ACTIVE_PER_CORE", "ADMISSION_KEY", "CURRENT_ADMISSION", "PACE_MAX_AGE_S", "PACE_WINDOW", "SHED_WINDOW_S",
            "WORKER_ACTIVE_PER_CORE", "AdmissionConfig", "AdmissionControl", "Overloaded", "default_config",
            "overloaded_response", "usable_cores",
        ]
    )  # fmt: skip
