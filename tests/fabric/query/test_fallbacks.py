"""Tests for fallbacks of failed lanes: run once, reuse a planned target, share a running one, stay in budget."""

from __future__ import annotations

import asyncio

from fabric.core.models import LaneOutcome, LaneRequest, LaneStatus
from fabric.query.executor import LaneExecutor, PlannedLane, RunStats
from fabric.query.fallbacks import RunState, run_fallback
from lanes.fake import FakeLane

REQ = LaneRequest(query="q", top_k=5)


def state(**tasks: asyncio.Task[LaneOutcome]) -> RunState:
    return RunState(tasks=dict(tasks), failed=set(), stats=RunStats())


async def fallback_of(ex: LaneExecutor, p: PlannedLane, st: RunState, budget_s: float = 2.0) -> LaneOutcome:
    loop = asyncio.get_running_loop()
    start = loop.time()
    return await run_fallback(ex, p, start, start + budget_s, REQ, st, LaneStatus.ERROR, "boom")


class TestRunFallback:
    async def test_no_fallback_keeps_the_failure(self) -> None:
        """A lane without a fallback ends with its own status and error."""
        out = await fallback_of(LaneExecutor({}), PlannedLane(name="a", budget_ms=100), state())
        assert (out.status, out.error) == (LaneStatus.ERROR, "boom")

    async def test_failed_target_is_not_tried(self) -> None:
        """A target that already failed in this query is not called."""
        b = FakeLane(name="b", hits=2)
        st = state()
        st.failed.add("b")
        out = await fallback_of(LaneExecutor({"b": b}), PlannedLane(name="a", budget_ms=100, fallback="b"), st)
        assert out.status is LaneStatus.ERROR
        assert b.calls == 0

    async def test_runs_target_and_publishes_answer(self) -> None:
        """An unplanned target runs once; its hits and a shared 'answered' future are recorded."""
        b = FakeLane(name="b", provider="pb", hits=2)
        st = state()
        out = await fallback_of(LaneExecutor({"b": b}), PlannedLane(name="a", budget_ms=100, fallback="b"), st)
        assert out.status is LaneStatus.FALLBACK
        assert (out.fallback_for, out.provider, len(out.hits)) == ("a", "pb", 2)
        assert st.fallbacks["b"].result() == ("a", True)

    async def test_failing_target_reports_both_errors(self) -> None:
        """When the fallback fails too, the original status stays and both errors are named."""
        b = FakeLane(name="b", error=RuntimeError("down"))
        st = state()
        out = await fallback_of(LaneExecutor({"b": b}), PlannedLane(name="a", budget_ms=100, fallback="b"), st)
        assert out.status is LaneStatus.ERROR
        assert "boom; fallback 'b'" in (out.error or "")
        assert st.fallbacks["b"].result() == ("a", False)

    async def test_shares_a_running_fallback(self) -> None:
        """A target another lane already ran is shared: no second call, no hits repeated."""
        b = FakeLane(name="b", hits=2)
        st = state()
        done: asyncio.Future[tuple[str, bool]] = asyncio.get_running_loop().create_future()
        done.set_result(("g", True))
        st.fallbacks["b"] = done
        out = await fallback_of(LaneExecutor({"b": b}), PlannedLane(name="a", budget_ms=100, fallback="b"), st)
        assert out.status is LaneStatus.FALLBACK
        assert out.hits == ()
        assert "shared with lane 'g'" in (out.error or "")
        assert b.calls == 0

    async def test_reuses_a_planned_target(self) -> None:
        """A target planned in the same query is awaited and reused, not called again."""
        b = FakeLane(name="b", hits=2)
        ex = LaneExecutor({"b": b})
        loop = asyncio.get_running_loop()
        task = loop.create_task(ex.run([PlannedLane(name="b", budget_ms=500)], REQ, deadline=loop.time() + 1.0))
        planned = loop.create_task(_outcome_of(task, "b"))
        out = await fallback_of(ex, PlannedLane(name="a", budget_ms=100, fallback="b"), state(b=planned))
        assert out.status is LaneStatus.FALLBACK
        assert out.hits == ()
        assert b.calls == 1

    async def test_no_budget_left_keeps_the_failure(self) -> None:
        """With (almost) no budget left the fallback is not started."""
        b = FakeLane(name="b", hits=2)
        out = await fallback_of(
            LaneExecutor({"b": b}), PlannedLane(name="a", budget_ms=100, fallback="b"), state(), budget_s=0.0
        )
        assert out.status is LaneStatus.ERROR
        assert b.calls == 0


async def _outcome_of(task: asyncio.Task[dict[str, LaneOutcome]], name: str) -> LaneOutcome:
    return (await task)[name]
