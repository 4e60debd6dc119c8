"""One query's plan and run, the seams of :meth:`fabric.query.engine.Engine.search` (plan → run → build).

:class:`QueryPlan` is what :meth:`~fabric.query.engine.Engine.plan` decides before any lane is called: the lanes, each
with its budget, weight, fallback and stage, the query's deadline and the cursor offset. A router replaces or
narrows that decision (which lanes, how much time each) without touching the run or the result. :class:`QueryRun`
is what running the plan produced (pre-flight, lane outcomes, the fused list, staged-retrieval record, timings),
from which the engine builds the :class:`~fabric.core.models.SearchResult`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fabric.core.models import (
    BoundConstraints,
    FusionMode,
    LaneOutcome,
    LaneStatus,
    PreflightResult,
    SearchRequest,
    SearchResult,
)
from fabric.core.strategies import RouteRecord
from fabric.query.answer_limits import apply_token_budget, citation_passages
from fabric.query.budgets import lane_budget_ms
from fabric.query.contributions import contributions
from fabric.query.executor import PlannedLane
from fabric.query.year_filter import shortfall
from fabric.settings import FusionConfig, LaneConfig, ModeConfig
from fusion.cursor import fingerprint
from fusion.pipeline import FusionOutput

if TYPE_CHECKING:
    from fabric.query.router.planner import RoutedPlan

__all__ = ["QueryPlan", "QueryRun", "build_result", "plan_lanes", "request_fingerprint"]


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """The lanes one query runs and the time it has (see the module docstring)."""

    lanes: tuple[PlannedLane, ...]
    """Planned lanes in result order; stage-2 lanes run only when stage 1 yields too few items."""
    mode: ModeConfig
    """The request mode's budgets."""
    multiplier: float
    """The ``cost`` constraint's budget multiplier (1.0 for ``medium``)."""
    deadline: float
    """Event-loop time (seconds) at which the query's total budget runs out."""
    now: datetime
    """The query's clock (UTC): constraints, recency and the pre-flight's current year read it."""
    offset: int = 0
    """First item of the page (from the cursor)."""
    fingerprint: str = ""
    """The request's cursor fingerprint over the lanes planned before routing (every cursor of the query carries it);
    empty in a plan built without one (the result then computes it from the plan's lanes)."""

    @property
    def names(self) -> list[str]:
        """The planned lanes' names, in order."""
        return [p.name for p in self.lanes]

    def stage(self, n: int) -> list[PlannedLane]:
        """The planned lanes of stage ``n`` (1 or 2)."""
        return [p for p in self.lanes if p.stage == n]


@dataclass(slots=True)
class QueryRun:
    """What running a :class:`QueryPlan` produced, before paging and reporting."""

    preflight: PreflightResult
    outcomes: dict[str, LaneOutcome]
    fused: FusionOutput
    stages: dict[str, Any]
    """Staged retrieval's record (``SearchResult.stages``)."""
    by_design: set[str] = field(default_factory=set)
    """Lanes that did not succeed by design (stage 2 skipped), which do not make the result partial."""
    preflight_ms: float = 0.0
    lanes_ms: float = 0.0
    """Time spent waiting on lanes (both stages)."""
    fusion_ms: float = 0.0
    chat_preflight: bool = False
    """Whether the pre-flight waited on a remote chat model (its time is then not the engine's overhead)."""
    routed: RoutedPlan | None = None
    """The router's plan when ``route != "all"`` (the router policy): its lanes replace the plan's, its record is
    reported."""
    bound: BoundConstraints | None = None
    """The constraints the lanes were given; their token budget and citation requirement shape the page."""


def plan_lanes(
    names: Sequence[str],
    configs: Mapping[str, LaneConfig],
    mode: ModeConfig,
    multiplier: float,
    available: Mapping[str, object],
    weights: Mapping[str, float] | None = None,
) -> tuple[PlannedLane, ...]:
    """Each named lane with its budget, weight and stage; a fallback only when that lane is ``available``.

    ``weights`` (the request's, lane → weight) replace the configured weights of the lanes they name.
    """
    weights = weights or {}
    return tuple(
        PlannedLane(
            name=name,
            budget_ms=lane_budget_ms(mode, lc, multiplier),
            weight=weights.get(name, lc.weight),
            fallback=lc.fallback if lc.fallback in available else None,
            fallback_reserve_ms=lc.fallback_reserve_ms,
            stage=lc.stage,
        )
        for name in names
        for lc in (configs[name],)
    )


def request_fingerprint(request: SearchRequest, names: Sequence[str], default_fusion: FusionMode) -> str:
    """The cursor fingerprint: what must not change between the pages of one query."""
    c = request.constraints
    return fingerprint(
        {
            "query": request.query,
            "mode": request.mode.value,
            "constraints": [c.time_range, c.sources, c.cost, c.depth, c.citations_required],
            "fusion": (request.fusion or default_fusion).value,
            "lanes": list(names),
            "top_k": request.top_k,
            **({"weights": dict(request.weights)} if request.weights is not None else {}),
            "bound": [request.budget_ms, request.preflight],  # a page depends on both: a toggle must not shift
            "route": request.route,
        }
    )


def _route(run: QueryRun, plan: QueryPlan, request: SearchRequest) -> dict[str, Any]:
    """The ``route`` section: the router's record (the federation's without one), with ``temporal_shortfall`` when
    the year filter left fewer matching items than the pages up to this one ask for."""
    if run.routed is None:
        return RouteRecord.federation(plan.names).to_dict()
    route = run.routed.record.to_dict()
    short = shortfall(run.bound, len(run.fused.items), plan.offset + request.top_k)
    if short is not None:
        route["temporal_shortfall"] = short
    return route


def build_result(
    request: SearchRequest,
    plan: QueryPlan,
    run: QueryRun,
    *,
    trace_id: str,
    started: float,
    cursor: Callable[[int, str], str],
    default_fusion: FusionMode,
    fusion_config: FusionConfig | None = None,
) -> SearchResult:
    """The page at the plan's offset, the cursor of the next page (``cursor(end, fingerprint)``), the partial
    flag (a planned lane that did not succeed, unless by design), the timings since ``started``
    (``time.perf_counter()``), the total of matching entries (the fused list before paging) and, given the fusion
    settings, each page item's contributions to its ``score_total`` (:mod:`fabric.query.contributions`).

    The bound ``cost`` token budget cuts the page (the next cursor resumes after the last item returned) and
    ``citations_required`` gives each item its citation-ready passage (:mod:`fabric.query.answer_limits`)."""
    fused = run.fused
    bound = run.bound or BoundConstraints()
    budgeted = apply_token_budget(fused.items[plan.offset : plan.offset + request.top_k], bound.max_tokens)
    page = budgeted.items
    end = plan.offset + len(page)
    next_cursor = None
    if end < len(fused.items):
        next_cursor = cursor(end, plan.fingerprint or request_fingerprint(request, plan.names, default_fusion))
    ordered = {p.name: run.outcomes[p.name] for p in plan.lanes}
    partial = any(o.status is not LaneStatus.SUCCESS and n not in run.by_design for n, o in ordered.items())
    total_ms = (time.perf_counter() - started) * 1000.0
    # A chat pre-flight is waiting on a remote model; rule-based pre-flight is the engine's own work.
    waiting_ms = run.lanes_ms + (run.preflight_ms if run.chat_preflight else 0.0)
    mode = request.fusion or default_fusion
    return SearchResult(
        query=request.query,
        mode=request.mode,
        trace_id=trace_id,
        items=page,
        lanes=ordered,
        preflight=run.preflight,
        next_cursor=next_cursor,
        partial=partial,
        dedup={"candidates": fused.candidates, "removed": fused.removed, **fused.duplicates},
        timings={
            "total_ms": total_ms,
            "preflight_ms": run.preflight_ms,
            "lanes_ms": run.lanes_ms,
            "fusion_ms": run.fusion_ms,
            "overhead_ms": max(0.0, total_ms - waiting_ms),
        },
        stages=run.stages,
        fusion_mode=mode,
        total=len(fused.items),
        contributions=contributions(page, ordered, fusion_config, mode) if fusion_config is not None else {},
        route=_route(run, plan, request),
        budget=budgeted.record,
        citations=citation_passages(request.query, page) if bound.citations_required else None,
    )
