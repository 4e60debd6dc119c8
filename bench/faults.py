"""Every fault of the fault proxy × every HTTP lane kind, through the lane executor: budgets, statuses, penalties.

For each lane kind (web: SearXNG, Wikipedia, Brave; feeds: RSS; markets: quotes; keyword: Meilisearch; vector:
Qdrant's server lane; graph: ArangoDB, see :mod:`bench.faults_stores`) a loopback fake of the upstream (the fakes
the lane tests use) sits behind a :class:`~tools.faultproxy.FaultProxy`; the
real lane reads it through the proxy with a guarded session, next to a healthy in-memory lane
(:class:`lanes.fake.FakeLane`). Each fault of :class:`~tools.faultproxy.Fault` is armed in turn and one query runs
through a fresh :class:`~fabric.query.executor.LaneExecutor` (fresh provider penalties) with ``--budget-ms``. Checks:

- ``budget``: the answer arrives within the budget + 25 ms;
- ``healthy_kept``: the healthy lane succeeded with all its hits;
- ``status``: the faulty lane's status is the expected one (``timeout`` for hang and slow body, ``success`` with
  repaired text for invalid Unicode, ``error`` for the rest);
- ``penalty``: the provider's health moved as it should (a failure sample for a failure, a suspension of at least
  Retry-After for 429, no failure for a success);
- ``nothing_lost``: every planned lane has an outcome and no lane error escaped the executor.

The pre-flight's chat endpoint is the kind ``preflight/chat`` (:mod:`bench.faults_preflight`): the same checks,
read for a step that must let the query proceed unrefined. Run it as ``fabric bench faults --json``; it prints
counts (cases, passed, failed per check) and the failing cases.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from bench import faults_preflight as preflight
from bench import faults_stores as stores
from fabric.core.models import LaneKind, LaneRequest, LaneStatus
from fabric.query.executor import LaneExecutor
from fabric.query.lane_plan import PlannedLane
from lanes.base import Lane, LaneResources, LaneSpec
from lanes.fake import FakeLane
from tests.support.http import guarded, serve
from tools.faultproxy import Fault, FaultProxy

__all__ = ["CHECKS", "KINDS", "add_arguments", "run"]

CHECKS = ("budget", "healthy_kept", "status", "penalty", "nothing_lost")
"""The checks every case is scored on."""

_SLACK_MS = 25.0
_HEALTHY_HITS = 3
_FAULT_PARAMS: dict[Fault, dict[str, Any]] = {
    Fault.SLOW_BODY: {"chunk_bytes": 1, "delay_s": 1.0},
    Fault.STATUS: {"status": 502},
    Fault.RATE_LIMITED: {"retry_after_s": 30},
    Fault.OVERSIZED: {"size_bytes": 12 * 1024 * 1024},
}

LaneFactory = Callable[[str, Any], Lane]
"""Builds the lane reading ``proxy_url`` with a guarded session."""


def _fake(path: str) -> Any:
    """A loopback fake of the lane tests (``module.name``), loaded at run time (the tests are not typed strictly)."""
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _web(backend: str, cls_path: str, **extra: Any) -> LaneFactory:
    def build(url: str, session: Any) -> Lane:
        cls = _fake(cls_path)
        spec = LaneSpec(name=backend, kind=LaneKind.WEB, backend=backend, options={"url": url, **extra})
        lane: Lane = cls(spec, LaneResources(http=session))
        return lane

    return build


def _rss(url: str, session: Any) -> Lane:
    from lanes.feeds.rss import RssNewsLane

    options = {"feeds": [f"{url}/rss.xml"], "refresh_s": 0.001}
    return RssNewsLane(
        LaneSpec(name="news", kind=LaneKind.NEWS, backend="rss", options=options), LaneResources(http=session)
    )


def _quotes(url: str, session: Any) -> Lane:
    from lanes.markets.quotes import QuotesMarketsLane

    fields = _fake("tests.lanes.markets.test_quotes.FIELDS")
    options = {"url_template": f"{url}/v1/quote?symbol={{symbol}}", "symbols": {"AAPL": "Apple"}, "fields": fields}
    spec = LaneSpec(name="markets", kind=LaneKind.MARKETS, backend="quotes", options=options)
    return QuotesMarketsLane(spec, LaneResources(http=session))


def _meili(url: str, session: Any) -> Lane:
    from lanes.keyword.meilisearch.lane import MeilisearchKeywordLane

    spec = LaneSpec(name="keyword", kind=LaneKind.KEYWORD, backend="meilisearch", options={"url": url})
    return MeilisearchKeywordLane(spec, LaneResources(http=session))


@asynccontextmanager
async def _app_upstream(make_app: Callable[[], Any]) -> AsyncIterator[str]:
    async with serve(make_app()) as srv:
        yield f"http://127.0.0.1:{srv.port}"


@asynccontextmanager
async def _meili_upstream() -> AsyncIterator[str]:
    """A fake Meilisearch holding the lane tests' documents (written directly, not through the proxy)."""
    fake = _fake("tests.lanes.keyword.fake_meili.FakeMeili")()
    async with serve(fake.app()) as srv:
        async with guarded(["meilisearch.test"]) as session:
            await _fake("tests.lanes.keyword.meilisearch.test_lane._ingest")(srv.port, session)
        yield f"http://127.0.0.1:{srv.port}"


def _upstream_of(app_path: str) -> Callable[[], AbstractAsyncContextManager[str]]:
    return lambda: _app_upstream(lambda: _fake(app_path)({}))


def _kinds() -> dict[str, tuple[Callable[[], AbstractAsyncContextManager[str]], LaneFactory, str]]:
    """Lane kind → (upstream, lane factory, query)."""
    web = "tests.lanes.web"
    return {
        "web/searxng": (
            _upstream_of(f"{web}.test_searxng.searxng_app"), _web("searxng", "lanes.web.searxng.SearxngWebLane"),
            "alpha",
        ),
        "web/wikipedia": (
            _upstream_of(f"{web}.test_wikipedia.wiki_app"), _web("wikipedia", "lanes.web.wikipedia.WikipediaWebLane"),
            "rrf",
        ),
        "web/brave": (
            _upstream_of(f"{web}.test_brave.brave_app"), _web("brave", "lanes.web.brave.BraveWebLane", api_key="token"),
            "rank fusion",
        ),
        "feeds/rss": (_upstream_of("tests.lanes.feeds.test_rss.feed_app"), _rss, "insulin therapy"),
        "markets/quotes": (_upstream_of("tests.lanes.markets.test_quotes.quote_app"), _quotes, "AAPL today"),
        "keyword/meilisearch": (_meili_upstream, _meili, "reciprocal rank fusion"),
        "vector/qdrant": (stores.qdrant_upstream, stores.qdrant_lane, stores.QDRANT_QUERY),
        "graph/arango": (stores.arango_upstream, stores.arango_lane, stores.ARANGO_QUERY),
    }  # fmt: skip


KINDS = (
    "web/searxng", "web/wikipedia", "web/brave", "feeds/rss", "markets/quotes", "keyword/meilisearch",
    "vector/qdrant", "graph/arango", "preflight/chat",
)  # fmt: skip
"""The lane kinds of the matrix."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of this benchmark."""
    parser.add_argument("--budget-ms", type=float, default=400.0, help="lane budget and query deadline (default 400)")
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated lane kinds (default: all)")
    parser.add_argument("--faults", default=",".join(f.value for f in Fault), help="comma-separated faults")


def _expected(fault: Fault) -> LaneStatus:
    if fault in (Fault.HANG, Fault.SLOW_BODY):
        return LaneStatus.TIMEOUT
    return LaneStatus.SUCCESS if fault is Fault.BAD_UNICODE else LaneStatus.ERROR


def _penalty_ok(fault: Fault, health: Any, hits: Any) -> bool:
    """The provider's health after one call with ``fault`` (see the module docstring)."""
    if fault is Fault.BAD_UNICODE:  # a success, its text repaired at the boundary
        texts = [h.title + h.text for h in hits]
        clean = all("\ud800" not in t for t in texts)
        return bool(health.get("failure_rate", 1.0) == 0.0 and clean)
    if fault is Fault.RATE_LIMITED:
        return bool(health.get("suspended_for_s", 0.0) >= 29.0)
    return bool(health.get("failure_rate", 0.0) > 0.0 or health.get("timeout_rate", 0.0) > 0.0)


async def _case(kind: str, fault: Fault, budget_ms: float) -> dict[str, Any]:
    upstream, factory, query = _kinds()[kind]
    async with upstream() as url, FaultProxy(url) as proxy, guarded(["127.0.0.1"]) as session:
        lane = factory(proxy.url, session)
        healthy = FakeLane(name="healthy", provider="healthy", hits=_HEALTHY_HITS)
        executor = LaneExecutor({lane.name: lane, "healthy": healthy})
        plan = [PlannedLane(name=lane.name, budget_ms=budget_ms), PlannedLane(name="healthy", budget_ms=budget_ms)]
        proxy.arm(fault, **_FAULT_PARAMS.get(fault, {}))
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()
        escaped = None
        try:
            outcomes = await executor.run(
                plan, LaneRequest(query=query, top_k=10), deadline=loop.time() + budget_ms / 1000
            )
        except Exception as exc:  # scored as "nothing_lost" failing, never raised
            outcomes, escaped = {}, repr(exc)
        elapsed_ms = (time.perf_counter() - t0) * 1000.0
        proxy.disarm()
        await lane.aclose()
    out = outcomes.get(lane.name)
    ok = outcomes.get("healthy")
    checks = {
        "budget": elapsed_ms <= budget_ms + _SLACK_MS,
        "healthy_kept": ok is not None and ok.status is LaneStatus.SUCCESS and len(ok.hits) == _HEALTHY_HITS,
        "status": out is not None and out.status is _expected(fault),
        "penalty": out is not None and _penalty_ok(fault, dict(out.health), out.hits),
        "nothing_lost": escaped is None and set(outcomes) == {lane.name, "healthy"},
    }
    return {
        "kind": kind,
        "fault": fault.value,
        "elapsed_ms": round(elapsed_ms, 1),
        "status": out.status.value if out is not None else None,
        "error": (out.error if out is not None else escaped),
        "checks": checks,
    }


async def _matrix(kinds: list[str], faults: list[Fault], budget_ms: float) -> list[dict[str, Any]]:
    out = []
    for kind in kinds:
        for fault in faults:
            if kind == preflight.KIND:
                out.append(await preflight.preflight_case(fault, budget_ms, _SLACK_MS, _FAULT_PARAMS.get(fault, {})))
            else:
                out.append(await _case(kind, fault, budget_ms))
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the matrix; counts per check and the failing cases."""
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise SystemExit(f"fabric bench faults: unknown kind(s) {', '.join(unknown)}; valid: {', '.join(KINDS)}")
    faults = [Fault(f) for f in args.faults.split(",") if f]
    cases = asyncio.run(_matrix(kinds, faults, args.budget_ms))
    per_check = {
        c: {"passed": sum(r["checks"][c] for r in cases), "failed": sum(not r["checks"][c] for r in cases)}
        for c in CHECKS
    }
    failed = [r for r in cases if not all(r["checks"].values())]
    return {
        "budget_ms": args.budget_ms,
        "slack_ms": _SLACK_MS,
        "kinds": kinds,
        "faults": [f.value for f in faults],
        "cases": len(cases),
        "passed": len(cases) - len(failed),
        "failed": len(failed),
        "checks": per_check,
        "elapsed_ms_max": max((r["elapsed_ms"] for r in cases), default=0.0),
        "failures": [_failure(r) for r in failed],
    }


def _failure(case: dict[str, Any]) -> dict[str, Any]:
    shown = {k: case[k] for k in ("kind", "fault", "elapsed_ms", "status", "error")}
    return shown | {"failed_checks": [c for c, ok in case["checks"].items() if not ok]}
