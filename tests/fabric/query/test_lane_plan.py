"""PlannedLane defaults and the RunStats wait window."""

from __future__ import annotations

import fabric.query.executor
import fabric.query.lane_plan as mod


def test_planned_lane_defaults() -> None:
    """A planned lane runs in stage 1 with weight 1, no fallback and no reserve unless told."""
    p = mod.PlannedLane(name="keyword", budget_ms=300.0)
    assert (p.weight, p.fallback, p.fallback_reserve_ms, p.stage) == (1.0, None, 0.0, 1)


def test_run_stats_window_widens() -> None:
    """mark() widens the window to cover every call; no call means no wait."""
    stats = mod.RunStats()
    assert stats.wait_ms == 0.0
    stats.mark(10.0, 10.5)
    stats.mark(10.2, 11.0)
    stats.mark(9.9, 10.1)
    assert (stats.wait_start, stats.wait_end) == (9.9, 11.0)
    assert round(stats.wait_ms, 6) == 1100.0


def test_exported_by_the_executor_too() -> None:
    """The executor's callers import both from fabric.query.executor."""
    assert fabric.query.executor.PlannedLane is mod.PlannedLane
    assert fabric.query.executor.RunStats is mod.RunStats
    assert set(mod.__all__) == {"PlannedLane", "RunStats"}
