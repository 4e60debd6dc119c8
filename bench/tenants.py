"""Tenant limits benchmark: one tenant offered 2x its rate limit while a second stays under it, over HTTP.

The service (:func:`fabric.serve.service.create_app` with keys in a temporary home and the per-tenant limits given)
runs in-process on 127.0.0.1 over an engine with one fake lane. Both tenants send open-loop (requests start on a
fixed schedule, whatever the answers): tenant ``heavy`` at ``--over`` times ``--rate``, tenant ``light`` at
``--under`` times it, for ``--seconds``. Figures per tenant: requests sent, answers by status, the 429 ratio
with its ideal value ``1 - (rate * seconds + burst) / sent`` for the heavy one, and the light tenant's p50/p95
latency and non-200 answers (it must not be hurt by the heavy one's rejections).

``--replicas N --state-url postgresql://...``: N apps (replicas) share one PostgreSQL database (keys and token
buckets, :mod:`fabric.serve.replicas`) and each tenant's requests go round robin over them; the heavy tenant's admitted
rate is then compared with its one limit (``heavy_admitted_per_s`` against ``heavy_admitted_per_s_ideal``), which
N replicas with their own buckets would each grant in full.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

from fabric.core.logs import configure_logging
from fabric.core.models import LaneKind, Mode
from fabric.settings import LaneConfig, ModeConfig, PreflightConfig, Settings
from lanes.base import LaneResources

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``fabric bench tenants``."""
    parser.add_argument("--rate", type=float, default=100.0, help="per-tenant limit, requests/s (default 100)")
    parser.add_argument("--burst", type=int, default=200, help="per-tenant bucket size (default 200)")
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of the load (default 10)")
    parser.add_argument("--over", type=float, default=2.0, help="heavy tenant's load / rate (default 2)")
    parser.add_argument("--under", type=float, default=0.5, help="light tenant's load / rate (default 0.5)")
    parser.add_argument("--replicas", type=int, default=1, help="service replicas sharing --state-url (default 1)")
    parser.add_argument("--state-url", default="", help="PostgreSQL URL the replicas share (FABRIC_STATE_URL)")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


async def _tenant(
    client: aiohttp.ClientSession, urls: list[str], key: str, rps: float, seconds: float
) -> dict[str, Any]:
    """Open-loop load of one tenant: request i starts at i / rps, sent to replica i mod len(urls)."""
    statuses: Counter[int] = Counter()
    latencies: list[float] = []
    headers = {"Authorization": f"Bearer {key}"}

    async def one(i: int) -> None:
        t0 = time.perf_counter()
        body = {"query": f"tenant query {i % 20}", "top_k": 10}
        async with client.post(urls[i % len(urls)], json=body, headers=headers) as r:
            await r.read()
            statuses[r.status] += 1
        if r.status == 200:
            latencies.append((time.perf_counter() - t0) * 1000.0)

    n = int(rps * seconds)
    start = time.perf_counter()
    tasks = []
    for i in range(n):
        delay = start + i / rps - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i)))
    await asyncio.gather(*tasks)
    return {"sent": n, "status": dict(sorted(statuses.items())), "latencies": latencies}


def _settings(home: Path) -> Settings:
    return Settings(
        home=home,
        modes={Mode.TECHNICAL: ModeConfig(total_budget_ms=1000.0, lanes={"keyword": 1000.0})},
        lanes={  # built per tenant from the settings: each tenant's engine has the same fake lane
            "keyword": LaneConfig(
                name="keyword", kind=LaneKind.KEYWORD, backend="fake", options={"hits": 20, "delay_ms": 1.0}
            )
        },
        preflight=PreflightConfig(enabled=False),
    )


async def _bench(args: argparse.Namespace) -> dict[str, Any]:
    from aiohttp.test_utils import TestServer

    from fabric.query.engine import Engine
    from fabric.serve.keys.store import KeyStore, Role
    from fabric.serve.limits.tenants import LimitConfig
    from fabric.serve.replicas import Replica
    from fabric.serve.service import create_app, default_guard

    with tempfile.TemporaryDirectory(prefix="fabric-tenants-") as tmp:
        home = Path(tmp)
        replicas = [Replica(args.state_url) for _ in range(args.replicas)] if args.state_url else [None]
        store = replicas[0].keys if replicas[0] is not None else KeyStore(home)
        if replicas[0] is not None:
            replicas[0].state.open_sync()
        keys = {name: store.create(name, Role.READER)[1] for name in ("heavy", "light")}
        limits = LimitConfig(rate=args.rate, burst=args.burst, concurrency=10_000)
        servers = []
        for replica in replicas:
            engine = Engine(_settings(home), resources=LaneResources(home=home))
            app = create_app(engine, guard=default_guard(engine, limits, replica), replica=replica)
            servers.append(TestServer(app, host="127.0.0.1"))
        for server in servers:
            await server.start_server()
        urls = [f"http://127.0.0.1:{server.port}/v1/search" for server in servers]
        try:
            connector = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as client:
                heavy, light = await asyncio.gather(
                    _tenant(client, urls, keys["heavy"], args.rate * args.over, args.seconds),
                    _tenant(client, urls, keys["light"], args.rate * args.under, args.seconds),
                )
        finally:
            for server in servers:
                await server.close()
    ideal = max(0.0, 1.0 - (args.rate * args.seconds + args.burst) / heavy["sent"]) if heavy["sent"] else 0.0
    admitted = heavy["status"].get(200, 0)
    return {
        "rate": args.rate,
        "burst": args.burst,
        "seconds": args.seconds,
        "replicas": len(urls),
        "shared_state": bool(args.state_url),
        "heavy_admitted_per_s": round(admitted / args.seconds, 2),
        "heavy_admitted_per_s_ideal": round(
            min(heavy["sent"], args.rate * args.seconds + args.burst) / args.seconds, 2
        ),
        "heavy_sent": heavy["sent"],
        "heavy_status": heavy["status"],
        "heavy_429_ratio": round(heavy["status"].get(429, 0) / heavy["sent"], 4) if heavy["sent"] else 0.0,
        "heavy_429_ratio_ideal": round(ideal, 4),
        "light_sent": light["sent"],
        "light_status": light["status"],
        "light_non_200": light["sent"] - light["status"].get(200, 0),
        "light_p50_ms": round(_pct(light["latencies"], 0.5), 3),
        "light_p95_ms": round(_pct(light["latencies"], 0.95), 3),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark and return its figures."""
    from fabric.core.errors import QueryError

    if args.rate <= 0 or args.burst < 1 or args.seconds <= 0 or args.over <= 0 or args.under <= 0:
        raise QueryError("bench", "--rate, --burst, --seconds, --over and --under must be positive")
    if args.replicas < 1 or (args.replicas > 1 and not args.state_url):
        raise QueryError("bench", "--replicas above 1 needs --state-url (the replicas' shared PostgreSQL database)")
    configure_logging(level="CRITICAL")
    return asyncio.run(_bench(args))
