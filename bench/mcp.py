"""MCP and framework-adapter figures on the project's own query set (``fabric/demo/queries``).

Usage (from the repository root)::

    FABRIC_CACHE_DIR=/work/cache/fabric fabric bench mcp [--repeats 5] [--limit 10] [--json]
    FABRIC_CACHE_DIR=/work/cache/fabric python -m bench.mcp [--repeats 5] [--limit 10] [--json]   # as a table

What it does:

1. ingests the demo corpus into a scratch home (the default embedded lanes, MiniLM) and copies it twice, so the
   in-process engine, the HTTP service and the ``fabric mcp`` subprocess each open their own;
2. per query and per repeat, interleaved (the order rotating from call to call): ``Engine.search`` directly;
   ``FabricSource.asearch`` (the layer the adapters share: the result as the client's typed page); the
   LangChain (``ainvoke``), LlamaIndex (``aretrieve``) and Haystack (``run_async``) adapters over that same open
   engine; ``FabricClient.search`` against the HTTP service over a second copy of the home (served on loopback
   from the same loop); the MCP ``query`` tool over stdio (the SDK's ``ClientSession`` + ``stdio_client``)
   against a ``fabric mcp`` subprocess on a third copy;
3. reports p50/p95 of each, each adapter's overhead over the direct call (difference of medians and ratio of
   medians, measured in the same run), and whether every surface returned the engine's ids in the engine's order.

The adapters need the ``langchain``, ``llamaindex`` and ``haystack`` extras; an adapter whose framework is missing
is left out of the table.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

__all__ = ["add_arguments", "main", "measure", "run"]

ROOT = Path(__file__).resolve().parents[1]
QUERY_SET = ROOT / "fabric" / "demo" / "queries"

Surface = Callable[[str], Awaitable[list[str]]]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _adapters(engine: Any, limit: int) -> dict[str, Surface]:
    """Each framework adapter over ``engine`` (already open), as ``query → ids``; missing frameworks left out."""
    from fabric.integrations.source import FabricSource

    source = FabricSource(engine=engine)

    async def fabric_source(q: str) -> list[str]:  # the shared conversion layer alone, no framework
        return [it.id for it in (await source.asearch(q, limit=limit)).items]

    out: dict[str, Surface] = {"source": fabric_source}
    try:
        from fabric.integrations.langchain import FabricRetriever as LangChainRetriever

        lc = LangChainRetriever.from_engine(engine, limit=limit)

        async def langchain(q: str) -> list[str]:
            return [str(d.id) for d in await lc.ainvoke(q)]

        out["langchain"] = langchain
    except ImportError:
        pass
    try:
        from fabric.integrations.llamaindex import FabricRetriever as LlamaRetriever

        li = LlamaRetriever.from_engine(engine, limit=limit)

        async def llamaindex(q: str) -> list[str]:
            return [n.node.node_id for n in await li.aretrieve(q)]

        out["llamaindex"] = llamaindex
    except ImportError:
        pass
    try:
        from fabric.integrations.haystack import FabricRetriever as HaystackRetriever

        hs = HaystackRetriever.from_engine(engine, top_k=limit)

        async def haystack(q: str) -> list[str]:
            return [d.id for d in (await hs.run_async(q))["documents"]]

        out["haystack"] = haystack
    except ImportError:
        pass
    return out


async def _measure(surfaces: dict[str, Surface], queries: list[str], repeats: int) -> dict[str, Any]:
    """Interleaved timings (ms) per surface, and per surface how many calls returned the ids ``engine`` returned
    for the same query in the same round, in the same order. The order of the surfaces rotates from one call of
    the round to the next, so none always runs first (or right after another)."""
    names = list(surfaces)
    times: dict[str, list[float]] = {name: [] for name in names}
    same: dict[str, int] = dict.fromkeys(names, 0)
    for q in queries:  # warm-up round, not timed
        for call in surfaces.values():
            await call(q)
    turn = 0
    for _ in range(repeats):
        for q in queries:
            got: dict[str, list[str]] = {}
            for name in names[turn % len(names) :] + names[: turn % len(names)]:
                t0 = time.perf_counter()
                got[name] = await surfaces[name](q)
                times[name].append((time.perf_counter() - t0) * 1000.0)
            turn += 1
            for name in names:
                same[name] += got[name] == got["engine"]
    return {"times": times, "same": same}


def _summary(measured: dict[str, Any]) -> dict[str, Any]:
    times, same = measured["times"], measured["same"]
    base = statistics.median(times["engine"])
    out: dict[str, Any] = {}
    for name, values in times.items():
        med = statistics.median(values)
        out[name] = {
            "p50_ms": round(med, 3),
            "p95_ms": round(_pct(values, 0.95), 3),
            "calls": len(values),
            "overhead_ms": round(med - base, 3),
            "ratio": round(med / base, 3) if base > 0 else None,
            "same_ids_same_order": f"{same[name]}/{len(values)}",
        }
    return out


async def _mcp_surface(home: Path, limit: int, stack: Any) -> Surface:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    env = {k: v for k, v in os.environ.items() if k.startswith(("FABRIC_", "HF_", "TRANSFORMERS_"))}
    env.pop("FABRIC_HOME", None)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "fabric.cli", "--home", str(home), "mcp"], cwd=str(ROOT), env=env
    )
    read, write = await stack.enter_async_context(stdio_client(params, errlog=sys.stderr))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()

    async def mcp_stdio(q: str) -> list[str]:
        result = await session.call_tool("query", {"topic": q, "limit": limit})
        if result.is_error:
            raise RuntimeError(result.content[0].text)
        return [item["id"] for item in json.loads(result.content[1].resource.text)["items"]]

    return mcp_stdio


async def _http_surface(home: Path, limit: int, stack: Any) -> Surface:
    """``FabricClient.search`` against the service app over ``home``, served on loopback from this loop."""
    from aiohttp import web

    from fabric.client import FabricClient
    from fabric.query.engine import Engine
    from fabric.serve.service import create_app
    from fabric.settings import load_settings

    runner = web.AppRunner(create_app(Engine(dataclasses.replace(load_settings(), home=home)), mcp=False))
    await runner.setup()
    stack.push_async_callback(runner.cleanup)
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    client = FabricClient(f"http://127.0.0.1:{runner.addresses[0][1]}")
    stack.push_async_callback(client.aclose)

    async def http_client(q: str) -> list[str]:
        return [it.id for it in (await client.search(q, limit=limit)).items]

    return http_client


async def measure(repeats: int = 5, limit: int = 10) -> dict[str, Any]:
    """Ingest, measure, summarise (see the module docstring)."""
    from contextlib import AsyncExitStack

    from fabric.eval.dataset import load_dataset
    from fabric.eval.harness import ingest_dataset
    from fabric.query.engine import Engine
    from fabric.query.validation import parse_request
    from fabric.settings import load_settings

    dataset = load_dataset(QUERY_SET)
    queries = [q.text for q in dataset.queries]
    scratch = Path(tempfile.mkdtemp(prefix="fabric-bench-mcp-"))
    try:
        settings = dataclasses.replace(load_settings(), home=scratch / "home")
        await ingest_dataset(settings, dataset)
        shutil.copytree(settings.home, scratch / "mcp-home")
        shutil.copytree(settings.home, scratch / "http-home")
        async with Engine(settings) as engine, AsyncExitStack() as stack:

            async def direct(q: str) -> list[str]:
                result = await engine.search(parse_request({"query": q, "limit": limit}, engine.settings))
                return [it.id for it in result.items]

            surfaces: dict[str, Surface] = {"engine": direct, **_adapters(engine, limit)}
            surfaces["http_client"] = await _http_surface(scratch / "http-home", limit, stack)
            surfaces["mcp_stdio"] = await _mcp_surface(scratch / "mcp-home", limit, stack)
            measured = await _measure(surfaces, queries, repeats)
        load = os.getloadavg()
        return {
            "query_set": str(QUERY_SET.relative_to(ROOT)),
            "queries": len(queries),
            "repeats": repeats,
            "limit": limit,
            "loadavg_1m": round(load[0], 2),
            "surfaces": _summary(measured),
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``fabric bench mcp``."""
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds over the query set (default 5)")
    parser.add_argument("--limit", type=int, default=10, help="items per query (default 10)")


def _figures(args: argparse.Namespace) -> dict[str, Any]:
    if args.repeats < 1 or args.limit < 1:
        from fabric.core.errors import QueryError

        raise QueryError("bench", "--repeats and --limit must be >= 1")
    from fabric.core.logs import configure_logging

    configure_logging(level="ERROR")
    os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # no usage reports from pipeline runs
    return asyncio.run(measure(repeats=args.repeats, limit=args.limit))


def run(args: argparse.Namespace) -> dict[str, Any]:
    """``fabric bench mcp``: the figures as one flat mapping (``<surface>_p50_ms``, ``<surface>_ratio``, ...)."""
    out = _figures(args)
    flat = {k: v for k, v in out.items() if k != "surfaces"}
    for name, s in out["surfaces"].items():
        flat |= {f"{name}_{key}": value for key, value in s.items()}
    return flat


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.mcp``: the figures as a table (or JSON with ``--json``)."""
    p = argparse.ArgumentParser(prog="python -m bench.mcp", description=(__doc__ or "").split("\n\n")[0])
    add_arguments(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    args = p.parse_args(argv)
    out = _figures(args)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{out['queries']} queries × {out['repeats']} rounds, limit {out['limit']}, load {out['loadavg_1m']}")
    print(f"{'surface':<12} {'p50 ms':>9} {'p95 ms':>9} {'overhead':>9} {'ratio':>7}  same ids/order")
    for name, s in out["surfaces"].items():
        print(
            f"{name:<12} {s['p50_ms']:>9.2f} {s['p95_ms']:>9.2f} {s['overhead_ms']:>9.2f} {s['ratio']:>7.3f}"
            f"  {s['same_ids_same_order']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
