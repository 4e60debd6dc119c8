"""Staged retrieval (the staged-retrieval policy): stage-2 "fill" lanes run only when stage 1 comes up short.

Budgets: when stage-2 lanes are planned, each stage-1 lane is asked for ``stage1_top_n`` hits (N1 = 20) and each
stage-2 lane for ``stage2_top_n`` (N2 = 20), never more than ``engine.lane_top_k``; at most ``max_appended`` (10)
stage-2-only items reach the answer (:func:`cap_appended`). A plan without stage-2 lanes is not staged: its lanes
keep ``engine.lane_top_k``.

Gate: stage 2 is triggered when stage-1 fusion yields fewer than ``fusion.stages.min_must_count`` items.
A triggered stage-2 lane is skipped when its provider's observed latency (the median of its recent
successful calls, from the provider penalties) exceeds ``stage2_cap_ms``; a provider with no history yet
is tried, cut at ``min(lane budget, stage2_cap_ms, time left)``. Stage-2 lanes that were not triggered or
were skipped by this policy are recorded with status ``skipped`` and do not make the answer partial.

Per-query metadata (``SearchResult.stages``): ``stage2_outcome`` (one of :data:`OUTCOMES`),
``stage2_should_trigger``, ``stage2_used``, ``stage2_skipped_budget``, ``stage1_count``, ``min_must_count``,
``stage2_appended``, ``stage1_ms``, ``stage2_ms``; the eval report counts queries per outcome.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from fabric.core.models import LaneOutcome, LaneRequest, LaneStatus
from fabric.query.executor import LaneExecutor, PlannedLane, RunStats
from fabric.settings import StageConfig
from fusion.pipeline import FusionContext, FusionOutput, fuse

__all__ = ["OUTCOMES", "cap_appended", "no_stage2", "outcome_of", "run_stage2", "stage_request"]

OUTCOMES = ("used", "skipped_budget", "skipped", "not_triggered", "no_stage2_lanes")
"""A query's stage-2 outcome: stage 2 ran; was skipped for its latency; was skipped otherwise (every stage-2
lane had already answered as a fallback); the gate did not trigger; the plan had no stage-2 lanes."""


def stage_request(request: LaneRequest, stage: int, config: StageConfig) -> LaneRequest:
    """``request`` with the stage's candidate budget (N1 or N2) as its ``top_k`` when that is smaller."""
    n = config.stage1_top_n if stage == 1 else config.stage2_top_n
    return request if request.top_k <= n else dataclasses.replace(request, top_k=n)


def no_stage2(stage1_ms: float) -> dict[str, Any]:
    """The stage record of a plan without stage-2 lanes."""
    return {
        "stage2_outcome": "no_stage2_lanes",
        "stage2_should_trigger": False,
        "stage2_used": False,
        "stage2_skipped_budget": False,
        "stage2_lanes": [],
        "stage1_ms": stage1_ms,
        "stage2_ms": 0.0,
    }


def outcome_of(info: dict[str, Any]) -> str:
    """The stage-2 outcome (:data:`OUTCOMES`) of a :func:`run_stage2` record."""
    if not info["stage2_should_trigger"]:
        return "not_triggered"
    if info["stage2_used"]:
        return "used"
    return "skipped_budget" if info["stage2_skipped_budget"] else "skipped"


def cap_appended(fused: FusionOutput, stages: dict[str, Any], max_appended: int) -> FusionOutput:
    """``fused`` keeping at most ``max_appended`` stage-2-only items (the best ranked) when stage 2 ran; how many
    it kept is recorded as ``stages["stage2_appended"]`` (0 when stage 2 did not run: the list is not read)."""
    stages["stage2_appended"] = 0
    if not stages.get("stage2_used"):
        return fused
    kept: list[Any] = []
    appended = dropped = 0
    for item in fused.items:
        if item.stage_priority == 1:
            if appended >= max_appended:
                dropped += 1
                continue
            appended += 1
        kept.append(item)
    stages["stage2_appended"] = appended
    if not dropped:
        return fused
    return dataclasses.replace(fused, items=tuple(kept), removed=fused.removed + dropped)


async def run_stage2(
    stage2: list[PlannedLane],
    outcomes: dict[str, LaneOutcome],
    lane_request: LaneRequest,
    *,
    deadline: float,
    ctx: FusionContext,
    executor: LaneExecutor,
    config: StageConfig,
    by_design: set[str],
    stats: RunStats | None = None,
) -> dict[str, Any]:
    """Run the stage-2 lanes if stage 1 is short; adds their outcomes to ``outcomes`` in place.

    Args:
        stage2: the planned stage-2 lanes.
        outcomes: stage-1 outcomes (updated with one outcome per stage-2 lane).
        lane_request: the request every lane receives.
        deadline: the query deadline (loop time).
        ctx: fusion context, to count stage-1 items exactly as the final fusion will.
        executor: the engine's executor (its penalties give observed latencies).
        config: the gate and the cap.
        by_design: receives the names of lanes skipped by policy (not a partial answer).
        stats: filled with the time spent waiting on stage-2 lane calls.

    Returns:
        The stage metadata for ``SearchResult.stages``.
    """
    first = fuse(outcomes, ctx)
    should = len(first.items) < config.min_must_count
    info: dict[str, Any] = {
        "stage1_count": len(first.items),
        "min_must_count": config.min_must_count,
        "stage2_should_trigger": should,
        "stage2_used": False,
        "stage2_skipped_budget": False,
        "stage2_ms": 0.0,
        "stage2_lanes": [p.name for p in stage2],
    }
    runnable: list[PlannedLane] = []
    # A stage-2 lane that already answered as a stage-1 lane's fallback is not run again (no double counting).
    served = {o.provider: o.lane for o in outcomes.values() if o.status is LaneStatus.FALLBACK and o.hits}
    for p in stage2:
        skip = _skip_reason(p, executor, served, len(first.items) if not should else None, config)
        if skip is None:
            runnable.append(dataclasses.replace(p, budget_ms=min(p.budget_ms, config.stage2_cap_ms)))
            continue
        reason, over_cap = skip
        info["stage2_skipped_budget"] = info["stage2_skipped_budget"] or over_cap
        by_design.add(p.name)
        outcomes[p.name] = executor.outcome(p, LaneStatus.SKIPPED, 0.0, error=reason)
    if runnable:
        t = time.perf_counter()
        request = stage_request(lane_request, 2, config)
        outcomes.update(await executor.run(runnable, request, deadline=deadline, stats=stats))
        info["stage2_ms"] = round((time.perf_counter() - t) * 1000.0, 3)
        info["stage2_used"] = True
    info["stage2_outcome"] = outcome_of(info)
    return info


def _skip_reason(
    p: PlannedLane, executor: LaneExecutor, served: dict[str, str], enough: int | None, config: StageConfig
) -> tuple[str, bool] | None:
    """Why stage-2 lane ``p`` is not run and whether for its latency (``enough``: stage 1's item count when it
    sufficed), or None to run it."""
    lane = executor.lanes.get(p.name)
    if lane is not None and lane.provider in served:
        return f"stage 2 not run: already answered as the fallback of lane {served[lane.provider]!r}", False
    if enough is not None:
        return f"stage 2 not triggered: stage 1 yielded {enough} >= {config.min_must_count} items", False
    observed = executor.penalties.latency_p50_ms(lane.provider) if lane is not None else None
    if observed is not None and observed > config.stage2_cap_ms:
        return f"stage 2 skipped: observed p50 {observed:.0f} ms > stage2_cap_ms {config.stage2_cap_ms:g}", True
    return None
