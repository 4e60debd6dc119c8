"""Staged retrieval (seed 000): stage-2 "fill" lanes run only when stage 1 comes up short.

Gate: stage 2 is triggered when stage-1 fusion yields fewer than ``fusion.stages.min_must_count`` items.
A triggered stage-2 lane is skipped when its provider's observed latency (the median of its recent
successful calls, from the provider penalties) exceeds ``stage2_cap_ms``; a provider with no history yet
is tried, cut at ``min(lane budget, stage2_cap_ms, time left)``. Stage-2 lanes that were not triggered or
were skipped by this policy are recorded with status ``skipped`` and do not make the answer partial.

Per-query metadata (``SearchResult.stages``): ``stage2_should_trigger``, ``stage2_used``,
``stage2_skipped_budget``, ``stage1_count``, ``min_must_count``, ``stage1_ms``, ``stage2_ms``.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from fabric.config import StageConfig
from fabric.executor import LaneExecutor, PlannedLane, RunStats
from fabric.models import LaneOutcome, LaneRequest, LaneStatus
from fusion.pipeline import FusionContext, fuse

__all__ = ["run_stage2"]


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
        outcomes.update(await executor.run(runnable, lane_request, deadline=deadline, stats=stats))
        info["stage2_ms"] = round((time.perf_counter() - t) * 1000.0, 3)
        info["stage2_used"] = True
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
