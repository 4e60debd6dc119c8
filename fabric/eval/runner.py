"""Runs every judged query of a dataset through a search engine: one fused pass, one pass per lane alone.

The engine is anything with ``async search(SearchRequest) -> SearchResult`` (:class:`SearchEngine`), so the
harness is unit-tested with an in-memory engine and runs :class:`fabric.query.engine.Engine` for real.

Rankings are scored by ``Hit.doc_id`` (the dataset's document id), duplicates dropped keeping the first.
Latency is the wall time around ``engine.search`` measured with at most ``concurrency`` queries in flight
(default 1, so figures are per-query latencies, not queueing), with calibration samples interleaved.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from fabric.core.models import FusionMode, LaneKind, LaneStatus, Mode, SearchRequest, SearchResult
from fabric.eval.calibration import CalibrationClock
from fabric.eval.dataset import Dataset
from fabric.eval.metrics import dedupe

__all__ = ["FEDERATION", "FUSED", "LaneHit", "PassResult", "QueryRun", "SearchEngine", "run_pass"]

FUSED = "fused"
"""Name of the pass that runs the selected lanes together under the evaluated route (the gated figures)."""

FEDERATION = "federation"
"""Name of the pass that runs every selected lane together under route ``all``, reported beside ``fused`` when the
evaluated route is another one."""

LaneHit = tuple[str, str, float]
"""(hit id, document id, native score) of one lane hit, best first."""


class SearchEngine(Protocol):
    """What the harness needs of an engine."""

    async def search(self, request: SearchRequest) -> SearchResult:
        """Answer one request."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryRun:
    """What one query returned in one pass."""

    query_id: str
    doc_ids: tuple[str, ...]
    """Document ids, best first, deduplicated."""
    latency_ms: float
    """Wall time around ``engine.search``."""
    overhead_ms: float | None = None
    """The engine's own overhead (``timings['overhead_ms']``), when reported."""
    intent: str | None = None
    """Pre-flight scenario class (temporal / relational / factual)."""
    stages: Mapping[str, Any] = field(default_factory=dict)
    """``SearchResult.stages``."""
    lane_status: Mapping[str, str] = field(default_factory=dict)
    """Lane → status."""
    lane_hits: Mapping[str, tuple[LaneHit, ...]] = field(default_factory=dict)
    """Lane → its hits (kept for offline fusion tuning)."""
    lane_confidence: Mapping[str, float] = field(default_factory=dict)
    """Lane → the confidence factor the engine applied to its weight (kept with the hits, for offline tuning)."""
    top_score: float | None = None
    """``score_total`` of the first item (None when the answer is empty)."""
    top_title: str = ""
    """Title of the first item (what a failing query found instead; :mod:`fabric.eval.slowcook`)."""
    entity_matches: int | None = None
    """Query entities the graph lane found in the graph (the router policy's diagnostic); None when no graph lane
    answered.
    Read from its hits' ``matched_entities`` (capped at 20); a graph lane answering with no hits matched none (a
    matched entity always reaches the chunks it appears in)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PassResult:
    """One pass over the dataset."""

    name: str
    """``fused`` or the lane name."""
    lanes: tuple[str, ...]
    """Lanes the requests were restricted to."""
    runs: Mapping[str, QueryRun]
    """Query id → run."""
    calibration_ms: tuple[float, ...] = ()
    """Calibration samples taken during the pass."""


def _to_run(query_id: str, result: SearchResult, latency_ms: float, keep_lane_hits: bool) -> QueryRun:
    lane_hits: dict[str, tuple[LaneHit, ...]] = {}
    confidence: dict[str, float] = {}
    if keep_lane_hits:
        lane_hits = {
            name: tuple((h.id, h.doc_id or h.id, h.score) for h in out.hits) for name, out in result.lanes.items()
        }
        confidence = {name: out.confidence for name, out in result.lanes.items() if out.confidence != 1.0}
    overhead = result.timings.get("overhead_ms")
    first = result.items[0] if result.items else None
    return QueryRun(
        query_id=query_id,
        doc_ids=tuple(dedupe([it.hit.doc_id or it.hit.id for it in result.items])),
        latency_ms=latency_ms,
        overhead_ms=float(overhead) if overhead is not None else None,
        intent=result.preflight.intent,
        stages=dict(result.stages),
        lane_status={name: out.status.value for name, out in result.lanes.items()},
        lane_hits=lane_hits,
        lane_confidence=confidence,
        top_score=first.score_total if first is not None else None,
        top_title=first.hit.title if first is not None else "",
        entity_matches=_entity_matches(result),
    )


def _entity_matches(result: SearchResult) -> int | None:
    """How many query entities the first successful graph lane matched (see :attr:`QueryRun.entity_matches`)."""
    for out in result.lanes.values():
        if out.kind is LaneKind.GRAPH and out.status is LaneStatus.SUCCESS:
            return len(out.hits[0].metadata.get("matched_entities", ())) if out.hits else 0
    return None


async def run_pass(
    engine: SearchEngine,
    dataset: Dataset,
    *,
    name: str,
    lanes: Sequence[str],
    fusion: FusionMode | None = None,
    mode: Mode = Mode.RESEARCH,
    top_k: int = 100,
    concurrency: int = 1,
    keep_lane_hits: bool = False,
    clock: CalibrationClock | None = None,
    on_query: Callable[[], None] | None = None,
    route: str = "all",
) -> PassResult:
    """Run every judged query once with ``lanes`` and return the per-query rankings and latencies.

    Args:
        engine: the engine to query (already opened).
        dataset: the judged queries.
        name: pass name (``fused`` or a lane name).
        lanes: lanes the requests are restricted to.
        fusion: fusion mode override (None: the engine's configured mode).
        mode: query mode (selects budgets).
        top_k: items asked of the engine per query.
        concurrency: queries in flight at once (1 measures un-queued latency).
        keep_lane_hits: keep each lane's raw hits (for ``fabric tune``).
        clock: calibration clock ticked after each query (only when ``concurrency == 1``).
        on_query: called after each query (progress bars).
        route: the requests' route (``all``: the federation; ``auto`` or a strategy: see :mod:`fabric.query.router`).
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    gate = asyncio.Semaphore(concurrency)
    runs: dict[str, QueryRun] = {}
    before = len(clock.samples) if clock else 0

    async def one(qid: str, text: str) -> None:
        request = SearchRequest(query=text, mode=mode, top_k=top_k, fusion=fusion, lanes=tuple(lanes), route=route)
        async with gate:
            start = time.perf_counter()
            result = await engine.search(request)
            latency_ms = (time.perf_counter() - start) * 1000.0
            if clock is not None and concurrency == 1:
                clock.tick()
        runs[qid] = _to_run(qid, result, latency_ms, keep_lane_hits)
        if on_query is not None:
            on_query()

    if concurrency == 1:
        for q in dataset.queries:
            await one(q.id, q.text)
    else:
        async with asyncio.TaskGroup() as tg:
            for q in dataset.queries:
                tg.create_task(one(q.id, q.text))
    samples = tuple(clock.samples[before:]) if clock else ()
    return PassResult(name=name, lanes=tuple(lanes), runs=runs, calibration_ms=samples)
