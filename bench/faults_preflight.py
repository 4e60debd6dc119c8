"""The pre-flight's chat endpoint as a kind of the fault matrix (:mod:`bench.faults`): ``preflight/chat``.

A loopback OpenAI-compatible chat endpoint (it rewrites the query to ``<query> refined``) sits behind the
:class:`~tools.faultproxy.FaultProxy`; a real :class:`~fabric.query.preflight.Preflight` calls it through a guarded
session with a quarter of the budget, then the query (refined or as given) runs through a fresh
:class:`~fabric.query.executor.LaneExecutor` on the healthy in-memory lane until the deadline. The checks are the
matrix's, read for the pre-flight:

- ``budget``: pre-flight plus lanes answer within the budget + 25 ms;
- ``healthy_kept``: the healthy lane succeeded with all its hits;
- ``status``: the query proceeds unrefined (bypassed, the query as given) with reason ``budget_exceeded`` for
  hang and slow body, ``model_unavailable`` for the other failures; refined, its text free of lone surrogates, for
  invalid Unicode;
- ``penalty``: after a failure the endpoint is left alone for at least 29 s (the clock moved 29 s on, the next
  query bypasses without a request reaching the proxy); after a timeout or a success the next query asks it again;
- ``nothing_lost``: the pre-flight answered, the lanes ran, and no error escaped.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from fabric.core.models import LaneRequest, LaneStatus, PreflightResult
from fabric.query.executor import LaneExecutor
from fabric.query.lane_plan import PlannedLane
from fabric.query.preflight import Preflight
from fabric.settings import PreflightConfig
from lanes.fake import FakeLane
from tests.support.http import guarded, serve
from tools.faultproxy import Fault, FaultProxy

__all__ = ["KIND", "preflight_case"]

KIND = "preflight/chat"
"""The matrix kind of the pre-flight chat endpoint."""

_QUERY = "insulin resistance since 2019"
_HEALTHY_HITS = 3
_PENALTY_S = 29.0


def _chat_app() -> web.Application:
    async def completions(request: web.Request) -> web.Response:
        body = await request.json()
        text = str(body["messages"][-1]["content"]) + " refined"
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": text}}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    return app


def _expected_reason(fault: Fault) -> str | None:
    if fault is Fault.BAD_UNICODE:
        return None
    return "budget_exceeded" if fault in (Fault.HANG, Fault.SLOW_BODY) else "model_unavailable"


def _status_ok(fault: Fault, res: PreflightResult | None) -> bool:
    reason = _expected_reason(fault)
    if res is None:
        return False
    if reason is None:
        return not res.bypassed and "\ud800" not in res.refined_query and "refined" in res.refined_query
    return res.bypassed and res.refined_query == _QUERY and (res.reason or "").startswith(reason)


async def _penalty_ok(fault: Fault, pf: Preflight, proxy: FaultProxy, now: list[float], budget_ms: float) -> bool:
    """A second query, the proxy passing through and the clock moved 29 s on (see the module docstring)."""
    now[0] += _PENALTY_S
    before = sum(proxy.seen.values())
    res = await _preflight(pf, budget_ms)
    asked = sum(proxy.seen.values()) > before
    if _expected_reason(fault) == "model_unavailable":
        return res.bypassed and (res.reason or "").startswith("model_unavailable") and not asked
    return not res.bypassed and asked


async def _preflight(pf: Preflight, budget_ms: float) -> PreflightResult:
    return await pf.run(
        _QUERY, current_year=2026, budget_ms=budget_ms / 4, lane_budgets_ms={"healthy": budget_ms},
        time_left_ms=budget_ms,
    )  # fmt: skip


async def preflight_case(fault: Fault, budget_ms: float, slack_ms: float, params: dict[str, Any]) -> dict[str, Any]:
    """One case of the matrix: ``fault`` on the chat endpoint, the query within ``budget_ms`` (+ ``slack_ms``)."""
    now = [1000.0]
    async with (
        serve(_chat_app()) as srv,
        FaultProxy(f"http://127.0.0.1:{srv.port}") as proxy,
        guarded(["127.0.0.1"]) as session,
    ):
        cfg = PreflightConfig(chat_url=f"{proxy.url}/v1", budget_ms=budget_ms / 4)
        pf = Preflight(cfg, http=session, clock=lambda: now[0])
        executor = LaneExecutor({"healthy": FakeLane(name="healthy", provider="healthy", hits=_HEALTHY_HITS)})
        proxy.arm(fault, **params)
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()
        deadline = loop.time() + budget_ms / 1000
        res, outcomes, escaped = None, {}, None
        try:
            res = await _preflight(pf, budget_ms)
            plan = [PlannedLane(name="healthy", budget_ms=budget_ms)]
            outcomes = await executor.run(plan, LaneRequest(query=res.refined_query, top_k=10), deadline=deadline)
        except Exception as exc:  # scored as "nothing_lost" failing, never raised
            escaped = repr(exc)
        elapsed_ms = (time.perf_counter() - t0) * 1000.0
        proxy.disarm()
        penalty = res is not None and await _penalty_ok(fault, pf, proxy, now, budget_ms)
    ok = outcomes.get("healthy")
    checks = {
        "budget": elapsed_ms <= budget_ms + slack_ms,
        "healthy_kept": ok is not None and ok.status is LaneStatus.SUCCESS and len(ok.hits) == _HEALTHY_HITS,
        "status": _status_ok(fault, res),
        "penalty": penalty,
        "nothing_lost": escaped is None and res is not None and set(outcomes) == {"healthy"},
    }
    status = None if res is None else ("bypassed" if res.bypassed else "refined")
    error = escaped if res is None else res.reason
    return {
        "kind": KIND, "fault": fault.value, "elapsed_ms": round(elapsed_ms, 1), "status": status, "error": error,
        "checks": checks,
    }  # fmt: skip
