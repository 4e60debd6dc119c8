"""Adapter benchmark: each server adapter's overhead over the raw HTTP round-trip, and a hung server under budget.

One loopback aiohttp app answers canned payloads in each service's wire format (SearXNG ``/search``, MediaWiki
``/w/api.php``, MDN ``/api/v1/search``, Meilisearch ``/indexes/chunks/search``, ArangoDB ``/_api/cursor``, an RSS
feed and a quote endpoint). For every adapter, raw calls (the same request through the same shared, guarded
session, body read, nothing else) and adapter calls (``lane.search``) alternate; the figure is the difference of
the medians (``overhead_p50_ms``) and their ratio. ArangoDB's "adapter" includes the synchronous driver in a
worker thread, so its overhead is the price of ``python-arango`` + ``to_thread`` over an aiohttp round-trip.

The hung-server part runs the engine with a healthy keyword lane and the SearXNG lane (fallback ``web_cache``
with the 25 ms fallback reserve of ``fabric/config/lanes.toml``, so a timed-out call still leaves the cache time to
answer; lane budgets: keyword 50 %, web 60 % of the request budget):
first while SearXNG answers (filling the web cache), then while it hangs. Figures: total latency of the hung
queries against the request budget, the web lane's statuses (``fallback`` = answered from the cache), cached
hits served, and the ``searxng`` provider's health after the run (penalty / suspension). ``hung_each`` repeats
the hung-server run for every adapter (no fallback): latency against the budget, the lane's statuses and the
provider's state and penalty afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from fabric.core.logs import configure_logging
from fabric.core.models import LaneKind, LaneRequest, LaneStatus, Mode, SearchRequest
from fabric.net.httpclient import AllowList, HostRule, StaticResolver, create_session
from fabric.net.webcache import WebCache
from fabric.settings import LaneConfig, ModeConfig, PenaltyConfig, PreflightConfig, Settings
from lanes.base import Lane, LaneResources, LaneSpec
from lanes.fake import FakeLane

__all__ = ["add_arguments", "run"]

_HOSTS = (
    "searxng.bench",
    "en.wikipedia.bench",
    "mdn.bench",
    "meili.bench",
    "arango.bench",
    "feeds.bench",
    "quotes.bench",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``fabric bench adapters``."""
    parser.add_argument("--iterations", type=int, default=300, help="timed calls per adapter and per raw path")
    parser.add_argument("--budget-ms", dest="budget_ms", type=float, default=400.0, help="budget of hung queries")
    parser.add_argument("--hung-queries", dest="hung_queries", type=int, default=20, help="queries while hung")


def _web_payloads(n: int = 20) -> dict[str, bytes]:
    """SearXNG, Wikipedia and MDN answers of ``n`` results each."""
    searx = {
        "query": "q",
        "number_of_results": n,
        "answers": [],
        "corrections": [],
        "infoboxes": [],
        "suggestions": [],
        "unresponsive_engines": [],
        "results": [
            {
                "url": f"https://site{i}.org/page/{i}",
                "title": f"Result {i}",
                "content": f"About {i}.",
                "engine": "brave",
                "engines": ["brave"],
                "score": n - i,
                "category": "general",
                "publishedDate": "2024-05-01T00:00:00",
            }
            for i in range(n)
        ],
    }
    wiki = {
        "batchcomplete": True,
        "query": {
            "searchinfo": {"totalhits": n},
            "search": [
                {
                    "ns": 0,
                    "title": f"Article {i}",
                    "pageid": i,
                    "size": 100,
                    "wordcount": 20,
                    "snippet": f'<span class="searchmatch">q</span> {i}',
                    "timestamp": "2024-01-01T00:00:00Z",
                }
                for i in range(n)
            ],
        },
    }
    mdn = {
        "documents": [
            {
                "mdn_url": f"/en-US/docs/Web/API/X{i}",
                "score": 10.0 - i / 10,
                "title": f"X{i}",
                "locale": "en-US",
                "slug": f"Web/API/X{i}",
                "popularity": 0.5,
                "summary": f"X {i}.",
                "highlight": {"body": [], "title": []},
            }
            for i in range(n)
        ],
        "metadata": {"took_ms": 1, "total": {"value": n, "relation": "eq"}, "size": n, "page": 1},
        "suggestions": [],
    }
    return {"searx": json.dumps(searx).encode(), "wiki": json.dumps(wiki).encode(), "mdn": json.dumps(mdn).encode()}


def _store_payloads() -> dict[str, bytes]:
    """Meilisearch and ArangoDB answers of 50 hits each."""
    meili = {
        "hits": [
            {
                "id": f"k{i}",
                "chunk_id": f"d{i}#0",
                "doc_id": f"d{i}",
                "title": f"T{i}",
                "text": f"text {i}",
                "url": "",
                "domain": "",
                "published_ts": 1700000000,
                "source_kind": "import",
                "source_ref": "",
                "trust": "untrusted",
                "quality": 0.5,
                "_rankingScore": 1 - i / 100,
            }
            for i in range(50)
        ],
        "query": "q",
        "processingTimeMs": 1,
        "limit": 50,
        "offset": 0,
        "estimatedTotalHits": 50,
    }
    arango = {
        "result": [
            {
                "doc": {
                    "_key": f"k{i}",
                    "chunk_id": f"d{i}#0",
                    "doc_id": f"d{i}",
                    "title": f"T{i}",
                    "text": f"text {i}",
                    "published_ts": None,
                },
                "hops": i % 3,
                "score": 1 / (1 + i),
            }
            for i in range(50)
        ],
        "hasMore": False,
        "cached": False,
        "error": False,
        "code": 201,
        "extra": {"warnings": [], "stats": {}},
    }
    return {"meili": json.dumps(meili).encode(), "arango": json.dumps(arango).encode()}


def _payloads() -> dict[str, bytes]:
    """Every backend's canned answer: the web and store JSON, an RSS feed of 50 items, one quote."""
    items = "".join(
        f"<item><title>Insulin news {i}</title><link>https://feeds.bench/a/{i}</link>"
        f"<description>insulin item {i}</description><pubDate>Tue, 05 Mar 2024 10:00:00 GMT</pubDate>"
        "</item>"
        for i in range(50)
    )
    rss = f'<?xml version="1.0"?><rss version="2.0"><channel><title>Bench</title>{items}</channel></rss>'
    quote = {"data": {"price": 187.5, "ts": 1709805600, "currency": "USD"}}
    return {**_web_payloads(), **_store_payloads(), "rss": rss.encode(), "quote": json.dumps(quote).encode()}


def _app(state: dict[str, bool]) -> web.Application:
    bodies = _payloads()

    def canned(key: str, status: int = 200, ctype: str = "application/json") -> Any:
        async def handler(_request: web.Request) -> web.Response:
            if (key == "searx" and state.get("hang")) or state.get(f"hang_{key}"):
                await asyncio.sleep(3600)
            return web.Response(body=bodies[key], status=status, content_type=ctype)

        return handler

    app = web.Application()
    app.router.add_get("/search", canned("searx"))
    app.router.add_get("/w/api.php", canned("wiki"))
    app.router.add_get("/api/v1/search", canned("mdn"))
    app.router.add_post("/indexes/chunks/search", canned("meili"))
    app.router.add_post("/_db/fabric/_api/cursor", canned("arango", 201))
    app.router.add_get("/feed.xml", canned("rss", ctype="application/rss+xml"))
    app.router.add_get("/v1/quote", canned("quote"))
    return app


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


_Adapters = dict[str, tuple[Lane, str, str, dict[str, Any] | None]]


def _spec(kind: LaneKind, backend: str, **opts: Any) -> LaneSpec:
    return LaneSpec(name=backend, kind=kind, backend=backend, options=opts)


def _lanes(port: int, resources: LaneResources) -> _Adapters:
    """adapter → (lane, raw method, raw URL, raw JSON body)."""
    base = "http://{}:" + str(port)
    return {**_web_lanes(base, resources), **_other_lanes(base, port, resources)}


def _web_lanes(base: str, resources: LaneResources) -> _Adapters:
    """The web adapters (SearXNG, Wikipedia, MDN) against the fake server at ``base``."""
    from lanes.web.mdn import MdnWebLane
    from lanes.web.searxng import SearxngWebLane
    from lanes.web.wikipedia import WikipediaWebLane

    spec = _spec
    return {
        "searxng": (
            SearxngWebLane(spec(LaneKind.WEB, "searxng", url=base.format("searxng.bench")), resources),
            "GET",
            base.format("searxng.bench") + "/search?q=q&format=json&pageno=1",
            None,
        ),
        "wikipedia": (
            WikipediaWebLane(spec(LaneKind.WEB, "wikipedia", url=base.format("en.wikipedia.bench")), resources),
            "GET",
            base.format("en.wikipedia.bench") + "/w/api.php?action=query&list=search&srsearch=q",
            None,
        ),
        "mdn": (
            MdnWebLane(spec(LaneKind.WEB, "mdn", url=base.format("mdn.bench")), resources),
            "GET",
            base.format("mdn.bench") + "/api/v1/search?q=q&locale=en-US",
            None,
        ),
    }


def _other_lanes(base: str, port: int, resources: LaneResources) -> _Adapters:
    """The store, graph, feed and markets adapters against the fake server at ``base``."""
    from lanes.feeds.rss import RssNewsLane
    from lanes.graph.arango.lane import ArangoGraphLane
    from lanes.keyword.meilisearch.lane import MeilisearchKeywordLane
    from lanes.markets.quotes import QuotesMarketsLane

    spec = _spec
    return {
        "meilisearch": (
            MeilisearchKeywordLane(spec(LaneKind.KEYWORD, "meilisearch", url=base.format("meili.bench")), resources),
            "POST",
            base.format("meili.bench") + "/indexes/chunks/search",
            {"q": "q", "limit": 50, "showRankingScore": True},
        ),
        "arango": (
            ArangoGraphLane(spec(LaneKind.GRAPH, "arango", url=f"http://127.0.0.1:{port}", timeout_s=1.0), resources),
            "POST",
            base.format("arango.bench") + "/_db/fabric/_api/cursor",
            {"query": "q", "bindVars": {}},
        ),
        "rss": (
            RssNewsLane(
                spec(LaneKind.NEWS, "rss", feeds=[base.format("feeds.bench") + "/feed.xml"], refresh_s=1e-9), resources
            ),
            "GET",
            base.format("feeds.bench") + "/feed.xml",
            None,
        ),
        "quotes": (
            QuotesMarketsLane(
                spec(
                    LaneKind.MARKETS,
                    "quotes",
                    url_template=base.format("quotes.bench") + "/v1/quote?symbol={symbol}",
                    symbols={"AAPL": "Apple"},
                    fields={"price": "data.price", "timestamp": "data.ts"},
                ),
                resources,
            ),
            "GET",
            base.format("quotes.bench") + "/v1/quote?symbol=AAPL",
            None,
        ),
    }


async def _time(fn: Callable[[], Awaitable[Any]]) -> float:
    t0 = time.perf_counter()
    await fn()
    return (time.perf_counter() - t0) * 1000.0


async def _overheads(port: int, resources: LaneResources, iterations: int) -> dict[str, Any]:
    session = resources.http
    assert session is not None
    out: dict[str, Any] = {}
    request = LaneRequest(query="insulin AAPL q", top_k=50)
    for name, (lane, method, url, body) in _lanes(port, resources).items():

        async def raw(method: str = method, url: str = url, body: Any = body) -> None:
            async with session.request(method, url, json=body) as resp:
                await resp.read()

        async def adapter(lane: Lane = lane) -> None:
            await lane.search(request)

        for _ in range(10):
            await raw()
            await adapter()
        raws, adapters = [], []
        for _ in range(iterations):
            raws.append(await _time(raw))
            adapters.append(await _time(adapter))
        await lane.aclose()
        raw_p50, ad_p50 = statistics.median(raws), statistics.median(adapters)
        out[name] = {
            "raw_p50_ms": round(raw_p50, 4),
            "adapter_p50_ms": round(ad_p50, 4),
            "overhead_p50_ms": round(ad_p50 - raw_p50, 4),
            "ratio": round(ad_p50 / raw_p50, 3),
        }
    return out


async def _hung(
    port: int, resources: LaneResources, state: dict[str, bool], args: argparse.Namespace
) -> dict[str, Any]:
    from fabric.query.engine import Engine
    from lanes.web.searxng import SearxngWebLane
    from lanes.web.web_cache import CachedWebLane

    web_spec = LaneSpec(
        name="web",
        kind=LaneKind.WEB,
        backend="searxng",
        options={"url": f"http://searxng.bench:{port}", "timeout_s": 5.0},
    )
    lanes: dict[str, Lane] = {
        "keyword": FakeLane(name="keyword", hits=10, delay_ms=2),
        "web": SearxngWebLane(web_spec, resources),
        "web_cache": CachedWebLane(LaneSpec(name="web_cache", kind=LaneKind.WEB, backend="web_cache"), resources),
    }
    with tempfile.TemporaryDirectory(prefix="fabric-bench-") as tmp:
        settings = Settings(
            home=Path(tmp),
            modes={
                Mode.SIMPLE: ModeConfig(
                    total_budget_ms=args.budget_ms, lanes={"keyword": args.budget_ms / 2, "web": args.budget_ms * 0.6}
                )
            },
            lanes={
                "keyword": LaneConfig(name="keyword", kind=LaneKind.KEYWORD, backend="fake"),
                "web": LaneConfig(
                    name="web", kind=LaneKind.WEB, backend="searxng", fallback="web_cache", fallback_reserve_ms=25.0
                ),
            },
            penalties=PenaltyConfig(),
            preflight=PreflightConfig(enabled=False),
        )
        request = SearchRequest(
            query="insulin therapy", mode=Mode.SIMPLE, top_k=10, lanes=("keyword", "web"), route="all"
        )
        async with Engine(settings, lanes=lanes, resources=resources) as engine:
            warm = [await engine.search(request) for _ in range(3)]
            state["hang"] = True
            results = [await engine.search(request) for _ in range(args.hung_queries)]
            health = engine.penalties.snapshot("searxng")
            state["hang"] = False
    totals = [r.timings["total_ms"] for r in results]
    statuses: dict[str, int] = {}
    for r in results:
        key = r.lanes["web"].status.value
        statuses[key] = statuses.get(key, 0) + 1
    cached = [len(r.lanes["web"].hits) for r in results if r.lanes["web"].status is LaneStatus.FALLBACK]
    return {
        "budget_ms": args.budget_ms,
        "warm_web_status": warm[-1].lanes["web"].status.value,
        "hung_total_p50_ms": round(_pct(totals, 0.5), 3),
        "hung_total_max_ms": round(max(totals), 3),
        "hung_all_within_budget_plus_25ms": max(totals) <= args.budget_ms + 25.0,
        "web_statuses": statuses,
        "cached_hits_served_p50": _pct([float(c) for c in cached], 0.5),
        "keyword_success_all": all(r.lanes["keyword"].status is LaneStatus.SUCCESS for r in results),
        "searxng_health": health,
    }


_ROUTE_OF = {
    "searxng": "searx",
    "wikipedia": "wiki",
    "mdn": "mdn",
    "meilisearch": "meili",
    "arango": "arango",
    "rss": "rss",
    "quotes": "quote",
}


async def _hung_each(
    port: int, resources: LaneResources, state: dict[str, bool], args: argparse.Namespace
) -> dict[str, Any]:
    """Every adapter against a hung server, through the engine: latency against budget, status, provider health."""
    from fabric.query.engine import Engine

    out: dict[str, Any] = {}
    for name, (lane, _m, _u, _b) in _lanes(port, resources).items():
        state[f"hang_{_ROUTE_OF[name]}"] = True
        with tempfile.TemporaryDirectory(prefix="fabric-bench-") as tmp:
            settings = Settings(
                home=Path(tmp),
                modes={
                    Mode.SIMPLE: ModeConfig(
                        total_budget_ms=args.budget_ms, lanes={"keyword": args.budget_ms, name: args.budget_ms * 0.6}
                    )
                },
                lanes={
                    "keyword": LaneConfig(name="keyword", kind=LaneKind.KEYWORD, backend="fake"),
                    name: LaneConfig(name=name, kind=lane.kind, backend=name),
                },
                penalties=PenaltyConfig(),
                preflight=PreflightConfig(enabled=False),
            )
            request = SearchRequest(
                query="insulin AAPL q", mode=Mode.SIMPLE, top_k=10, lanes=("keyword", name), route="all"
            )
            lanes: dict[str, Lane] = {"keyword": FakeLane(name="keyword", hits=10, delay_ms=2), name: lane}
            async with Engine(settings, lanes=lanes, resources=resources) as engine:
                results = [await engine.search(request) for _ in range(args.hung_queries)]
                health = engine.penalties.snapshot(lane.provider)
        state[f"hang_{_ROUTE_OF[name]}"] = False
        totals = [r.timings["total_ms"] for r in results]
        statuses: dict[str, int] = {}
        for r in results:
            statuses[r.lanes[name].status.value] = statuses.get(r.lanes[name].status.value, 0) + 1
        out[name] = {
            "total_max_ms": round(max(totals), 3),
            "total_p50_ms": round(_pct(totals, 0.5), 3),
            "statuses": statuses,
            "keyword_success_all": all(r.lanes["keyword"].status is LaneStatus.SUCCESS for r in results),
            "provider_state": health["state"],
            "provider_penalty": health["penalty"],
        }
    return out


async def _bench(args: argparse.Namespace) -> dict[str, Any]:
    from aiohttp.test_utils import TestServer

    state: dict[str, bool] = {"hang": False}
    server = TestServer(_app(state), host="127.0.0.1")
    await server.start_server()
    allow = AllowList.of(HostRule(h, private_ok=True) for h in _HOSTS)
    session = create_session(allow, resolver=StaticResolver(dict.fromkeys(_HOSTS, "127.0.0.1")))
    try:
        resources = LaneResources(http=session, web_cache=WebCache())
        port = server.port
        assert port is not None
        overheads = await _overheads(port, resources, args.iterations)
        hung = await _hung(port, resources, state, args)
        hung_each = await _hung_each(port, resources, state, args)
    finally:
        await session.close()
        await server.close()
    return {"iterations": args.iterations, "overhead": overheads, "hung_server": hung, "hung_each": hung_each}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark and return its figures."""
    if args.iterations < 1 or args.budget_ms <= 0 or args.hung_queries < 1:
        from fabric.core.errors import QueryError

        raise QueryError("bench", "--iterations, --budget-ms and --hung-queries must be positive")
    configure_logging(level="CRITICAL")
    return asyncio.run(_bench(args))
