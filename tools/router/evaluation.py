"""Quality against cost of each router: passes per route through the real engine, oracle labels, the report.

Every judged query runs under each route (``all``, ``dense``, ``temporal``, ``graph``, ``auto`` with the
heuristic and, when trained, with the classifier) *interleaved*: for one query all routes run back to back, in
an order rotated per query, so load drift on a shared machine hits every route alike and the ratios (measured in
one run) stay fair. An untimed warm-up query (route ``all``) precedes them.

The **oracle** router is replayed, not run: per query it takes the strategy :func:`select_gold_label` picks from
the forced Dense/Temporal/Graph passes, with that pass's ranking, lane calls and latency (it knows the answers,
so no probe). It is the ceiling a router could reach with these strategies.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from fabric.core.models import Mode, SearchRequest, SearchResult
from fabric.core.strategies import STRATEGY_ORDER
from fabric.eval.dataset import Dataset
from fabric.eval.metrics import dedupe, query_metrics
from fabric.eval.report import percentile
from fabric.query.router.oracle import ABLATION_DELTAS, ablation, select_gold_label

__all__ = [
    "ROUTER_NAMES",
    "RouteRun",
    "RouterEngine",
    "oracle_runs",
    "router_report",
    "run_routes",
    "strategy_scores",
    "summarise",
]

ROUTER_NAMES = ("all", "dense", "heuristic", "classifier", "oracle")
"""Routers of the report: all-lanes, Dense-only, heuristic, classifier, oracle."""


class RouterEngine(Protocol):
    """What the passes need of an engine: search, and a router whose chooser can be switched."""

    router: Any

    async def search(self, request: SearchRequest) -> SearchResult:
        """Answer one request."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteRun:
    """One query under one router."""

    doc_ids: tuple[str, ...]
    latency_ms: float
    lane_calls: int
    strategy: str
    route: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class PassSpec:
    """A router pass: the request route and, for ``auto``, the chooser."""

    name: str
    route: str
    chooser: str | None = None


def default_passes(with_classifier: bool) -> list[PassSpec]:
    """all, the three forced strategies, auto (heuristic) and, when trained, auto (classifier)."""
    specs = [PassSpec(name="all", route="all")]
    specs += [PassSpec(name=s.value, route=s.value) for s in STRATEGY_ORDER]
    specs.append(PassSpec(name="heuristic", route="auto", chooser="heuristic"))
    if with_classifier:
        specs.append(PassSpec(name="classifier", route="auto", chooser="classifier"))
    return specs


async def _one(engine: RouterEngine, spec: PassSpec, request: SearchRequest) -> RouteRun:
    if spec.chooser is not None:
        engine.router.chooser = spec.chooser
    start = time.perf_counter()
    result = await engine.search(request)
    latency_ms = (time.perf_counter() - start) * 1000.0
    route = dict(result.route)
    return RouteRun(
        doc_ids=tuple(dedupe([it.hit.doc_id or it.hit.id for it in result.items])),
        latency_ms=latency_ms,
        lane_calls=int(route.get("lane_calls", len(result.lanes))),
        strategy=str(route.get("strategy", "all")),
        route=route,
    )


async def run_routes(
    engine: RouterEngine,
    dataset: Dataset,
    specs: Sequence[PassSpec],
    *,
    lanes: Sequence[str],
    mode: Mode = Mode.RESEARCH,
    top_k: int = 10,
    on_query: Callable[[], None] | None = None,
) -> dict[str, dict[str, RouteRun]]:
    """Pass name → query id → run, every route of a query run back to back in a rotated order."""
    out: dict[str, dict[str, RouteRun]] = {s.name: {} for s in specs}
    for i, q in enumerate(dataset.queries):

        def request(route: str, text: str = q.text) -> SearchRequest:
            return SearchRequest(query=text, mode=mode, top_k=top_k, lanes=tuple(lanes), route=route)

        await engine.search(request("all"))  # untimed: warms caches for this query
        k = i % len(specs)
        for spec in [*specs[k:], *specs[:k]]:
            out[spec.name][q.id] = await _one(engine, spec, request(spec.route))
        if on_query is not None:
            on_query()
    return out


def strategy_scores(dataset: Dataset, passes: Mapping[str, Mapping[str, RouteRun]]) -> dict[str, dict[str, float]]:
    """Query id → strategy → nDCG@10 of the forced passes."""
    return {
        q.id: {s.value: query_metrics(passes[s.value][q.id].doc_ids, dataset.qrels[q.id])["ndcg_at_10"]
               for s in STRATEGY_ORDER}
        for q in dataset.queries
    }  # fmt: skip


def oracle_runs(
    passes: Mapping[str, Mapping[str, RouteRun]], scores: Mapping[str, Mapping[str, float]], delta: float
) -> dict[str, RouteRun]:
    """Query id → the run of the strategy the oracle labels (replayed from the forced passes)."""
    return {qid: passes[select_gold_label(s, delta=delta).value][qid] for qid, s in scores.items()}


def summarise(dataset: Dataset, runs: Mapping[str, RouteRun]) -> dict[str, Any]:
    """nDCG@10, lane calls per query, p50/p95 latency and the strategies chosen."""
    ids = [q.id for q in dataset.queries if q.id in runs]
    n = len(ids) or 1
    lat = [runs[q].latency_ms for q in ids]
    chosen: dict[str, int] = {}
    for q in ids:
        chosen[runs[q].strategy] = chosen.get(runs[q].strategy, 0) + 1
    return {
        "queries": len(ids),
        "ndcg_at_10": sum(query_metrics(runs[q].doc_ids, dataset.qrels[q])["ndcg_at_10"] for q in ids) / n,
        "lanes_per_query": sum(runs[q].lane_calls for q in ids) / n,
        "p50_ms": percentile(lat, 50),
        "p95_ms": percentile(lat, 95),
        "strategies": dict(sorted(chosen.items())),
    }


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 4) if b else None


def router_report(dataset: Dataset, passes: Mapping[str, Mapping[str, RouteRun]], *, delta: float) -> dict[str, Any]:
    """The ``routers`` table (with ratios against all-lanes), the forced strategies, labels and δ ablation."""
    scores = strategy_scores(dataset, passes)
    rows: dict[str, dict[str, Any]] = {}
    for name in ROUTER_NAMES:
        runs = oracle_runs(passes, scores, delta) if name == "oracle" else passes.get(name)
        if runs is not None:
            rows[name] = summarise(dataset, runs)
    base = rows["all"]
    for row in rows.values():
        row["ndcg_ratio_vs_all"] = _ratio(row["ndcg_at_10"], base["ndcg_at_10"])
        row["lanes_ratio_vs_all"] = _ratio(row["lanes_per_query"], base["lanes_per_query"])
        row["p95_ratio_vs_all"] = _ratio(row["p95_ms"], base["p95_ms"])
        for key in ("ndcg_at_10", "lanes_per_query", "p50_ms", "p95_ms"):
            row[key] = round(row[key], 4)
    forced = {s.value: summarise(dataset, passes[s.value]) for s in STRATEGY_ORDER}
    return {
        "routers": rows,
        "strategies": {k: {m: (round(v, 4) if isinstance(v, float) else v) for m, v in r.items()}
                       for k, r in forced.items()},
        "oracle_delta": delta,
        "label_ablation": ablation(scores.values(), ABLATION_DELTAS),
    }  # fmt: skip
