"""Load benchmark: bounded concurrent ``POST /v1/search`` against ``fabric serve`` on loopback with fake lanes.

The service (:func:`fabric.serve.service.create_app`) runs in-process on 127.0.0.1 over an engine with three fake
lanes (50 hits each, ``--lane-delay-ms`` apart from each other), so the figures are the HTTP edge + engine +
fusion cost under concurrency, not a backend's. A semaphore bounds requests in flight (``--concurrency``).
Figures: p50/p99/max latency per request as the client sees it, requests per second, non-200 answers, and
(100 sequential requests) the HTTP edge's own cost: p50 over HTTP minus p50 of the same ``engine.search`` direct.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp

from fabric.core.logs import configure_logging
from fabric.core.models import LaneKind, Mode
from fabric.settings import LaneConfig, ModeConfig, PreflightConfig, Settings
from lanes.base import Lane, LaneResources
from lanes.fake import FakeLane

if TYPE_CHECKING:
    from fabric.query.engine import Engine

__all__ = ["add_arguments", "run"]

_SEQUENTIAL = 100
_LANES = (("keyword", LaneKind.KEYWORD), ("vector", LaneKind.VECTOR), ("graph", LaneKind.GRAPH))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``fabric bench load``."""
    parser.add_argument("--requests", type=int, default=2000, help="total requests (default 2000)")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight at once (default 32)")
    parser.add_argument("--lane-delay-ms", dest="lane_delay_ms", type=float, default=5.0, help="fake lane latency")
    parser.add_argument("--budget-ms", dest="budget_ms", type=float, default=1000.0, help="request budget")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def _engine(args: argparse.Namespace, home: Path) -> tuple[Settings, Engine]:
    """Settings and an engine over fake lanes answering 50 hits after ``--lane-delay-ms``."""
    from fabric.query.engine import Engine

    settings = Settings(
        home=home,
        modes={Mode.TECHNICAL: ModeConfig(total_budget_ms=args.budget_ms,
                                          lanes=dict.fromkeys((n for n, _ in _LANES), args.budget_ms))},
        lanes={n: LaneConfig(name=n, kind=k, backend="fake") for n, k in _LANES},
        preflight=PreflightConfig(enabled=False),
    )  # fmt: skip
    lanes: dict[str, Lane] = {
        n: FakeLane(name=n, kind=k, provider=f"{n}_fake", hits=50, delay_ms=args.lane_delay_ms) for n, k in _LANES
    }
    return settings, Engine(settings, lanes=lanes, resources=LaneResources(home=home))


async def _sequential(
    client: aiohttp.ClientSession, url: str, engine: Engine, settings: Settings
) -> tuple[list[float], list[float]]:
    """The HTTP edge's own cost: one request over HTTP, then the same ``engine.search`` direct (ms each)."""
    from fabric.query.validation import parse_request

    seq_http, seq_engine = [], []
    for i in range(_SEQUENTIAL):
        body = {"query": f"load query {i % 50}", "top_k": 10}
        t1 = time.perf_counter()
        async with client.post(url, json=body) as resp:
            await resp.read()
        seq_http.append((time.perf_counter() - t1) * 1000.0)
        t1 = time.perf_counter()
        await engine.search(parse_request(body, settings))
        seq_engine.append((time.perf_counter() - t1) * 1000.0)
    return seq_http, seq_engine


async def _bench(args: argparse.Namespace) -> dict[str, Any]:
    from aiohttp.test_utils import TestServer

    from fabric.serve.service import create_app

    with tempfile.TemporaryDirectory(prefix="fabric-load-") as tmp:
        settings, engine = _engine(args, Path(tmp))
        server = TestServer(create_app(engine), host="127.0.0.1")
        await server.start_server()
        url = f"http://127.0.0.1:{server.port}/v1/search"
        latencies: list[float] = []
        failures = 0
        sem = asyncio.Semaphore(args.concurrency)
        connector = aiohttp.TCPConnector(limit=args.concurrency)
        try:
            async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as client:

                async def one(i: int) -> None:
                    nonlocal failures
                    async with sem:
                        t0 = time.perf_counter()
                        async with client.post(url, json={"query": f"load query {i % 50}", "top_k": 10}) as resp:
                            await resp.read()
                            if resp.status != 200:
                                failures += 1
                        latencies.append((time.perf_counter() - t0) * 1000.0)

                await asyncio.gather(*(one(i) for i in range(min(50, args.requests))))  # warm-up
                seq_http, seq_engine = await _sequential(client, url, engine, settings)
                latencies.clear()
                t0 = time.perf_counter()
                await asyncio.gather(*(one(i) for i in range(args.requests)))
                wall = time.perf_counter() - t0
        finally:
            await server.close()
    return {
        "requests": args.requests,
        "concurrency": args.concurrency,
        "lane_delay_ms": args.lane_delay_ms,
        "p50_ms": round(_pct(latencies, 0.5), 3),
        "p99_ms": round(_pct(latencies, 0.99), 3),
        "max_ms": round(max(latencies), 3),
        "rps": round(args.requests / wall, 1),
        "non_200": failures,
        "sequential_http_p50_ms": round(_pct(seq_http, 0.5), 3),
        "sequential_engine_p50_ms": round(_pct(seq_engine, 0.5), 3),
        "http_edge_p50_ms": round(_pct(seq_http, 0.5) - _pct(seq_engine, 0.5), 3),
        "wall_s": round(wall, 3),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark and return its figures."""
    if args.requests < 1 or args.concurrency < 1 or args.lane_delay_ms < 0 or args.budget_ms <= 0:
        from fabric.core.errors import QueryError

        raise QueryError("bench", "--requests, --concurrency and --budget-ms must be positive")
    configure_logging(level="CRITICAL")
    return asyncio.run(_bench(args))
