"""Fallbacks of failed lanes: run each configured fallback once per query, inside the failed lane's budget.

A fallback target already planned in the same query is not run twice: its answer is reused (counted once,
under its own name). A fallback already run for the same trace id (in stage 1, say) is shared, not run again.
:class:`~fabric.query.executor.LaneExecutor` calls :func:`run_fallback` after a lane fails or is suspended.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from fabric.core.models import LaneOutcome, LaneRequest, LaneStatus
from fabric.query.lane_plan import PlannedLane, RunStats
from lanes.base import Lane

if TYPE_CHECKING:
    from fabric.query.executor import LaneExecutor

__all__ = ["RunState", "fuse_once", "run_fallback"]


@dataclass(slots=True)
class RunState:
    """What one :meth:`~fabric.query.executor.LaneExecutor.run` shares between its lane tasks."""

    tasks: dict[str, asyncio.Task[LaneOutcome]]
    failed: set[str]
    stats: RunStats
    fallbacks: dict[str, asyncio.Future[tuple[str, bool]]] = field(default_factory=dict)
    """Fallback target → (lane that ran it, answered?): a target is run once per query."""


@dataclass(slots=True, frozen=True)
class _Failed:
    """The failed lane whose fallback is tried: its plan, start, cut and failure."""

    p: PlannedLane
    start: float
    cut_at: float
    status: LaneStatus
    error: str | None

    def elapsed_ms(self) -> float:
        return (asyncio.get_running_loop().time() - self.start) * 1000.0


async def run_fallback(
    ex: LaneExecutor,
    p: PlannedLane,
    start: float,
    cut_at: float,
    request: LaneRequest,
    state: RunState,
    status: LaneStatus,
    error: str | None,
) -> LaneOutcome:
    """Run ``p.fallback`` inside ``p``'s remaining budget, or return the failure as it is."""
    f = _Failed(p, start, cut_at, status, error)
    target = p.fallback
    if not target or target in state.failed:
        return _failure(ex, f)
    fb_lane = ex.lanes.get(target)
    if target in state.tasks:
        return await _reuse_planned(ex, f, target, fb_lane, state)
    if fb_lane is None or cut_at - asyncio.get_running_loop().time() <= 0.001:
        return _failure(ex, f)
    if target in state.fallbacks:
        return await _share_running(ex, f, target, fb_lane, state)
    return await _run_own(ex, f, target, fb_lane, request, state)


def _failure(ex: LaneExecutor, f: _Failed) -> LaneOutcome:
    return ex.outcome(f.p, f.status, f.elapsed_ms(), error=f.error)


def _answered(ex: LaneExecutor, f: _Failed, fb_lane: Lane | None, note: str) -> LaneOutcome:
    """A fallback outcome without hits of its own (they are fused once, under the lane that produced them)."""
    return ex.outcome(
        f.p, LaneStatus.FALLBACK, f.elapsed_ms(), lane=fb_lane, fallback_for=f.p.name, error=f"{f.error}; {note}"
    )


async def _wait_within(aw: asyncio.Future[Any], f: _Failed, stats: RunStats) -> None:
    loop = asyncio.get_running_loop()
    t_wait = loop.time()
    await asyncio.wait({aw}, timeout=max(0.0, f.cut_at - loop.time()))
    stats.mark(t_wait, loop.time())


async def _reuse_planned(
    ex: LaneExecutor, f: _Failed, target: str, fb_lane: Lane | None, state: RunState
) -> LaneOutcome:
    """The target runs in this query already: wait for it within our budget and reuse its answer."""
    other = state.tasks[target]
    if not other.done():
        await _wait_within(other, f, state.stats)
    if other.done() and other.result().status is LaneStatus.SUCCESS:
        note = f"answered by lane {target!r} of this query (hits fused once, under {target!r})"
        return _answered(ex, f, fb_lane, note)
    return _failure(ex, f)


async def _share_running(ex: LaneExecutor, f: _Failed, target: str, fb_lane: Lane, state: RunState) -> LaneOutcome:
    """Another failed lane already runs this fallback: share its answer, fuse its hits once."""
    shared = state.fallbacks[target]
    await _wait_within(shared, f, state.stats)
    owner, hits_ok = shared.result() if shared.done() else ("", False)
    if hits_ok:
        note = f"fallback {target!r} shared with lane {owner!r} (hits fused once, under {owner!r})"
        return _answered(ex, f, fb_lane, note)
    return _failure(ex, f)


async def _run_own(
    ex: LaneExecutor, f: _Failed, target: str, fb_lane: Lane, request: LaneRequest, state: RunState
) -> LaneOutcome:
    """Run the fallback lane itself and publish whether it answered to lanes that share it."""
    mine: asyncio.Future[tuple[str, bool]] = asyncio.get_running_loop().create_future()
    state.fallbacks[target] = mine
    try:
        result, fb_error = await ex.attempt(fb_lane, request, f.cut_at, state.stats)
    except BaseException:
        mine.set_result((f.p.name, False))
        raise
    mine.set_result((f.p.name, isinstance(result, list)))
    if not isinstance(result, list):
        return ex.outcome(f.p, f.status, f.elapsed_ms(), error=f"{f.error}; fallback {target!r}: {fb_error}")
    outcome = ex.outcome(
        f.p,
        LaneStatus.FALLBACK,
        f.elapsed_ms(),
        hits=result,
        lane=fb_lane,
        fallback_for=f.p.name,
        error=f"{f.error}; served by fallback {target!r}",
    )
    return replace(outcome, weight=f.p.weight * ex.penalties.weight(fb_lane.provider))


def fuse_once(outcomes: dict[str, LaneOutcome], planned: Iterable[PlannedLane]) -> dict[str, LaneOutcome]:
    """``outcomes`` with each fallback's hits dropped when its target also answered as a lane of this query in
    another run (the router's probe failed over to a lane its strategy runs next): the hits are fused once, under
    the lane that produced them, and the fallback keeps its status and says where its answer went."""
    targets = {p.name: p.fallback for p in planned if p.fallback}
    for name, o in list(outcomes.items()):
        target = targets.get(name)
        own = outcomes.get(target) if target and target != name else None
        if o.status is LaneStatus.FALLBACK and o.hits and own is not None and own.status is LaneStatus.SUCCESS:
            note = f"answered by lane {target!r} of this query (hits fused once, under {target!r})"
            outcomes[name] = replace(o, hits=(), error=f"{o.error}; {note}" if o.error else note)
    return outcomes
