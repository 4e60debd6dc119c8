"""Budgets per query: the total deadline and each lane's budget (the fusion policy's lanes table,
``fabric/config/modes.toml``).

A lane's budget is ``mode.lanes[lane.name]``, else ``mode.lanes[lane.kind]``, else the mode's total, times
the cost multiplier (low 0.5, medium 1.0, high 2.0). The total budget is the request's own ``budget_ms``
when given (an explicit wish, not scaled), else the mode's ``total_budget_ms`` times the multiplier. Lanes
are always cut at ``min(lane budget, time left to the deadline)``.
"""

from __future__ import annotations

from fabric.settings import LaneConfig, ModeConfig

__all__ = ["lane_budget_ms", "total_budget_ms"]


def lane_budget_ms(mode: ModeConfig, lane: LaneConfig, multiplier: float = 1.0) -> float:
    """The budget of ``lane`` under ``mode``, scaled by ``multiplier``."""
    budget = mode.lanes.get(lane.name)
    if budget is None:
        budget = mode.lanes.get(lane.kind.value, mode.total_budget_ms)
    return float(budget) * multiplier


def total_budget_ms(mode: ModeConfig, request_budget_ms: float | None, multiplier: float = 1.0) -> float:
    """The query's overall budget."""
    if request_budget_ms is not None:
        return float(request_budget_ms)
    return mode.total_budget_ms * multiplier
