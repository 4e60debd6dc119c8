"""What the executor is handed and what it reports back besides outcomes: :class:`PlannedLane` (one lane the
planner decided to run, with its budget, weight and fallback) and :class:`RunStats` (the window spent waiting on
lane calls, for the engine's overhead accounting). :mod:`fabric.query.executor` exports both.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PlannedLane", "RunStats"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedLane:
    """One lane the planner decided to run for this query."""

    name: str
    """Lane name (result key)."""
    budget_ms: float
    """Lane budget, already scaled by the cost multiplier."""
    weight: float = 1.0
    """Configured fusion weight."""
    fallback: str | None = None
    """Lane run in this lane's remaining budget when it fails."""
    fallback_reserve_ms: float = 0.0
    """The lane's own call is cut this much before its budget ends (at most a quarter of the budget), so that its
    fallback still has time after a timeout."""
    stage: int = 1
    """1 must-first, 2 fill."""


@dataclass(slots=True)
class RunStats:
    """The window (loop time) in which one :meth:`LaneExecutor.run` waited on lane calls.

    Everything outside it (planning, task setup, outcome building, fusion) is the engine's own overhead.
    """

    wait_start: float | None = None
    wait_end: float | None = None

    def mark(self, start: float, end: float) -> None:
        """Widen the window to include ``[start, end]``."""
        self.wait_start = start if self.wait_start is None else min(self.wait_start, start)
        self.wait_end = end if self.wait_end is None else max(self.wait_end, end)

    @property
    def wait_ms(self) -> float:
        """Length of the window in milliseconds (0 when no lane was called)."""
        if self.wait_start is None or self.wait_end is None:
            return 0.0
        return (self.wait_end - self.wait_start) * 1000.0
