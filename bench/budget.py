"""Budget benchmark: never late, never lost, with a hung, a crashing and a rate-limited provider.

Six lanes per query: ``hung`` blocks a worker thread and ignores cancellation (a hung synchronous SDK call),
``crash`` raises, ``limited`` answers 429 with Retry-After (``LaneRejected.suspend_s``), and three healthy
lanes answer in 1–20 ms (seeded random delays; one of them in a worker thread, like the synchronous-SDK
lanes, so thread-pool starvation by hung calls would show up as lost healthy hits). Queries run
concurrently under a short request budget.

Figures:

- ``p50_ms`` / ``p99_ms`` / ``max_ms``: total latency per query in the concurrent phase, against ``budget_ms``;
- ``healthy_hits_share``: hits of the healthy lanes present in the answer, over every query (must be 1.0);
- ``overhead_p50_ms``: the engine's own time per query (total minus the window spent waiting on lane calls
  and pre-flight), measured one query at a time after the concurrent phase, because under concurrency a
  query's wall time also holds other queries' turns on the loop (``overhead_concurrent_p50_ms`` shows that);
  ``cpu_ms_per_query`` is the process CPU of the concurrent phase divided by its queries;
- ``hung_admitted_max_ms``: the slowest query in which the hung lane was actually called (cut, abandoned);
- ``suspended_query_p50_ms``: a query's total time while the hung, crashing and rate-limited providers are
  all suspended; ``suspended_skip_p50_ms``: the time spent on one suspended lane;
- ``gc_pause_max_ms``: the longest garbage-collector pause during the run (start-up objects are frozen first,
  as a service would do).

The machine is shared: run it when the load is low, and read ``cpu_ms_per_query`` next to the latencies.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from fabric.core.errors import LaneRejected
from fabric.core.logs import configure_logging
from fabric.core.models import Hit, LaneKind, LaneRequest, LaneStatus, Mode, SearchRequest, SearchResult
from fabric.settings import LaneConfig, ModeConfig, PenaltyConfig, PreflightConfig, Settings
from lanes.base import BaseLane, Lane, LaneResources, LaneSpec
from lanes.fake import FakeLane, synthetic_hits
from tests.support.hits import ingest_features

__all__ = ["add_arguments", "run"]

_HEALTHY = ("alpha", "beta", "gamma")
_HITS = 10
_BLOCK_S = 1.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``fabric bench budget``."""
    parser.add_argument("--queries", type=int, default=1000, help="number of queries (default 1000)")
    parser.add_argument("--budget-ms", dest="budget_ms", type=float, default=100.0, help="request budget")
    parser.add_argument("--concurrency", type=int, default=16, help="queries in flight at once")
    parser.add_argument("--seed", type=int, default=7, help="random seed of the healthy lanes' delays")
    parser.add_argument(
        "--overhead-queries",
        dest="overhead_queries",
        type=int,
        default=300,
        help="queries run one at a time after the concurrent phase to measure the engine's own overhead",
    )


class _StubbornLane(BaseLane):
    """Blocks a worker thread and swallows every cancellation until the thread returns."""

    provider = "hung_provider"

    async def search(self, request: LaneRequest) -> list[Hit]:
        """Never answers within any sane budget, and ignores cancellation while waiting."""
        done = threading.Event()
        fut = asyncio.ensure_future(asyncio.to_thread(done.wait, _BLOCK_S))
        while not fut.done():
            try:
                await asyncio.shield(fut)
            except asyncio.CancelledError:
                continue  # deliberately ignore cancellation, as a badly written SDK wrapper would
        return []


class _JitterLane(BaseLane):
    """Healthy lane answering after a seeded random 1–20 ms delay."""

    def __init__(self, name: str, rng: random.Random, *, threaded: bool = False) -> None:
        super().__init__(LaneSpec(name=name, kind=LaneKind.KEYWORD, backend="fake"), LaneResources())
        self.provider = f"{name}_provider"
        self._rng = rng
        self.threaded = threaded
        # Stored chunks carry the features ingestion computes once (quality, SimHash, URL and title keys); do
        # the same so that fusion's dedup costs what it costs in production, not a per-query re-hash.
        self._hits = ingest_features(synthetic_hits(name, _HITS))

    async def search(self, request: LaneRequest) -> list[Hit]:
        """Answer ten hits after 1–20 ms (in a worker thread for a synchronous-SDK lane)."""
        delay = self._rng.uniform(0.001, 0.020)
        if self.threaded:
            await asyncio.to_thread(time.sleep, delay)
        else:
            await asyncio.sleep(delay)
        return self._hits[: request.top_k]


def _settings(budget_ms: float, home: Path) -> Settings:
    names = (*_HEALTHY, "hung", "crash", "limited")
    lanes = {n: LaneConfig(name=n, kind=LaneKind.KEYWORD, backend="fake") for n in names}
    mode = ModeConfig(total_budget_ms=budget_ms, preflight_ms=500.0, lanes=dict.fromkeys(names, budget_ms))
    return Settings(
        home=home,
        modes={Mode.TECHNICAL: mode},
        lanes=lanes,
        # Short suspensions so the hung provider is probed again (half-open) every second or so.
        penalties=PenaltyConfig(base_suspend_s=0.25, max_suspend_s=1.0),
        preflight=PreflightConfig(),
    )


def _lanes(seed: int) -> dict[str, Lane]:
    rng = random.Random(seed)
    # The last healthy lane answers from a worker thread, like the SQLite/Arango/Meilisearch lanes: it is the
    # one that starves if hung calls exhaust the thread pool.
    lanes: dict[str, Lane] = {
        n: _JitterLane(n, random.Random(rng.random()), threaded=n == _HEALTHY[-1]) for n in _HEALTHY
    }
    lanes["hung"] = _StubbornLane(LaneSpec(name="hung", kind=LaneKind.KEYWORD, backend="fake"), LaneResources())
    lanes["crash"] = FakeLane(name="crash", provider="crash_provider", error=RuntimeError("backend crashed"))
    lanes["limited"] = FakeLane(
        name="limited", provider="limited_provider", error=LaneRejected("HTTP 429", suspend_s=0.5)
    )
    return lanes


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class _Tally:
    """Per-query figures of one phase, kept compact (results are not retained: a growing heap means longer
    garbage-collector pauses, which would be the bench measuring itself)."""

    def __init__(self) -> None:
        self.totals: list[float] = []
        self.overheads: list[float] = []
        self.suspended: list[float] = []
        self.hung: list[float] = []
        self.skips: list[float] = []
        self.statuses: dict[str, int] = {}
        self.present = self.expected = 0

    def add(self, res: SearchResult) -> None:
        total = res.timings["total_ms"]
        self.totals.append(total)
        self.overheads.append(res.timings["overhead_ms"])
        ids = {it.id for it in res.items}
        for name in _HEALTHY:
            self.expected += _HITS
            self.present += sum(1 for i in range(_HITS) if f"{name}-{i}" in ids)
        statuses = {n: o.status for n, o in res.lanes.items()}
        if all(statuses[n] is LaneStatus.SUSPENDED for n in ("hung", "crash", "limited")):
            self.suspended.append(total)
        if statuses["hung"] is LaneStatus.TIMEOUT:
            self.hung.append(total)
        self.skips += [o.latency_ms for o in res.lanes.values() if o.status is LaneStatus.SUSPENDED]
        for n, st in statuses.items():
            key = f"{n}:{st.value}"
            self.statuses[key] = self.statuses.get(key, 0) + 1


class _GcPauses:
    """Longest garbage-collector pause while installed (a stop-the-world pause delays every query)."""

    def __init__(self) -> None:
        self.max_ms = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.max_ms = max(self.max_ms, (time.perf_counter() - self._start) * 1000.0)


async def _bench(args: argparse.Namespace) -> dict[str, Any]:
    import gc
    import tempfile

    from fabric.query.engine import Engine

    request = SearchRequest(query="budget bench", top_k=50, mode=Mode.TECHNICAL, route="all")
    sem = asyncio.Semaphore(max(1, args.concurrency))
    main, seq, pauses = _Tally(), _Tally(), _GcPauses()

    async def one(engine: Engine) -> None:
        async with sem:
            main.add(await engine.search(request))

    with tempfile.TemporaryDirectory(prefix="fabric-bench-") as tmp:
        async with Engine(_settings(args.budget_ms, Path(tmp)), lanes=_lanes(args.seed)) as engine:
            # What a long-running service does after start-up: move everything loaded so far out of the
            # collector's way, so full collections do not re-scan imported modules on every pass.
            gc.collect()
            gc.freeze()
            gc.callbacks.append(pauses)
            try:
                t0, cpu0 = time.perf_counter(), time.process_time()
                await asyncio.gather(*(one(engine) for _ in range(args.queries)))
                wall_s, cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
                # Overhead is measured one query at a time: under concurrency a query's wall time also holds
                # other queries' turns on the event loop, which is neither its own work nor lane waiting.
                for _ in range(args.overhead_queries):
                    seq.add(await engine.search(request))
            finally:
                gc.callbacks.remove(pauses)
                gc.unfreeze()
            health = engine.health()
    return _figures(args, main, seq, pauses, health, wall_s, cpu_s)


def _figures(
    args: argparse.Namespace,
    main: _Tally,
    seq: _Tally,
    pauses: _GcPauses,
    health: dict[str, Any],
    wall_s: float,
    cpu_s: float,
) -> dict[str, Any]:
    """The printed figures from the concurrent tally (``main``) and the one-at-a-time overhead tally (``seq``)."""
    statuses = dict(main.statuses)
    for key, n in seq.statuses.items():
        statuses[key] = statuses.get(key, 0) + n
    totals = main.totals
    return {
        "queries": args.queries,
        "concurrency": args.concurrency,
        "budget_ms": args.budget_ms,
        "p50_ms": round(_pct(totals, 0.50), 3),
        "p99_ms": round(_pct(totals, 0.99), 3),
        "max_ms": round(max(totals), 3),
        "p99_within_budget_plus_25ms": _pct(totals, 0.99) <= args.budget_ms + 25.0,
        "healthy_hits_share": round((main.present + seq.present) / (main.expected + seq.expected), 6),
        "overhead_p50_ms": round(statistics.median(seq.overheads), 4) if seq.overheads else None,
        "overhead_p99_ms": round(_pct(seq.overheads, 0.99), 4) if seq.overheads else None,
        "overhead_queries": args.overhead_queries,
        "overhead_concurrent_p50_ms": round(statistics.median(main.overheads), 4),
        "cpu_ms_per_query": round(1000.0 * cpu_s / args.queries, 4),
        "sequential_p50_ms": round(_pct(seq.totals, 0.5), 3) if seq.totals else None,
        "suspended_query_p50_ms": round(_pct(main.suspended + seq.suspended, 0.5), 3),
        "suspended_queries": len(main.suspended) + len(seq.suspended),
        "suspended_skip_p50_ms": round(_pct(main.skips + seq.skips, 0.5), 4),
        "hung_admitted_queries": len(main.hung) + len(seq.hung),
        "hung_admitted_max_ms": round(max(main.hung + seq.hung, default=0.0), 3),
        "abandoned_total": health["abandoned_total"],
        "gc_pause_max_ms": round(pauses.max_ms, 3),
        "lane_statuses": dict(sorted(statuses.items())),
        "wall_s": round(wall_s, 2),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark and return its figures."""
    if args.queries < 1 or args.concurrency < 1 or args.budget_ms <= 0 or args.overhead_queries < 0:
        from fabric.core.errors import QueryError

        raise QueryError("bench", "--queries, --concurrency and --budget-ms must be positive")
    configure_logging(level="CRITICAL")
    return asyncio.run(_bench(args))
