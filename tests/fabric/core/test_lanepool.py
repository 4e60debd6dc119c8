"""Tests for the lane pool and call clocks: a lane call's waiting and working time, measured apart."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest

import fabric.core.lanepool as mod
from fabric.core.lanepool import (
    CallClock,
    LanePool,
    context_for,
    current_clocks,
    is_lane_pool,
    note_pending,
    running_for,
)


async def _in_context(clock: CallClock, fn: object) -> None:
    """Run ``asyncio.to_thread(fn)`` in a task whose context carries ``clock``."""
    loop = asyncio.get_running_loop()
    task = loop.create_task(asyncio.to_thread(fn), context=context_for((clock,)))  # type: ignore[arg-type]
    await task


class TestCallClock:
    def test_a_call_without_jobs_is_charged_its_wall_time(self) -> None:
        """An HTTP or in-memory lane uses no worker thread: its wall time is what it costs."""
        assert CallClock().charged_ms(42.0) == 42.0

    def test_a_queued_job_costs_nothing(self) -> None:
        """A job submitted but not started yet has worked for no time."""
        clock = CallClock()
        clock.submitted()
        clock.waited(0.5)
        assert (clock.jobs, clock.work_s(), clock.charged_ms(500.0)) == (1, 0.0, 0.0)

    def test_running_and_finished_jobs_count_up_to_now(self) -> None:
        """A finished job counts its run; a running one counts until the time asked about."""
        clock = CallClock()
        clock.submitted()
        clock.started(1, 10.0)
        clock.finished(1, 10.25)
        clock.submitted()
        clock.started(2, 11.0)
        assert clock.work_s(now=11.5) == 0.75
        assert clock.charged_ms(100.0) == 100.0  # never more than the wall time

    def test_time_waiting_for_a_core_is_not_work(self) -> None:
        """The growth of the thread's run-queue wait during a job is taken off the job's run."""
        clock = CallClock()
        clock.submitted()
        clock.started(1, 10.0, tid=None, runq_s=3.0)
        clock.finished(1, 11.0, runq_s=3.75)
        assert clock.work_s(now=20.0) == 0.25

    def test_run_queue_of_this_thread(self) -> None:
        """Linux tells how long this thread waited for a core (None elsewhere)."""
        import sys

        value = mod.run_queue_s()
        assert value is None if not sys.platform.startswith("linux") else value >= 0.0

    def test_run_queue_is_read_per_thread(self) -> None:
        """Each thread reads its own counter (its file is kept open); another thread's is read by its id."""
        if not sys.platform.startswith("linux"):
            pytest.skip("schedstat is Linux's")
        here = [mod.run_queue_s(), mod.run_queue_s()]
        seen: list[tuple[float | None, float | None]] = []

        def other() -> None:
            seen.append((mod.run_queue_s(), mod.run_queue_s(threading.get_native_id())))

        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
        assert here[0] is not None
        assert here[1] is not None
        assert here[1] >= here[0]
        ((mine, by_id),) = seen
        assert mine is not None
        assert by_id is not None
        assert by_id >= mine
        assert mod._THIS_THREAD.stat.fd is not None


class TestLanePool:
    async def test_jobs_of_a_lane_call_are_timed(self) -> None:
        """A job submitted in a lane call's context adds its wait and run to the call's clock."""
        loop = asyncio.get_running_loop()
        loop.set_default_executor(LanePool(max_workers=2))
        clock = CallClock()
        await _in_context(clock, lambda: threading.Event().wait(0.01))
        assert clock.jobs == 1
        assert clock.worked_s > 0.0
        assert is_lane_pool(loop)

    async def test_a_job_waiting_for_a_thread_has_not_worked(self) -> None:
        """While every worker is busy, the queued job of a lane call shows no work, only a wait."""
        loop = asyncio.get_running_loop()
        loop.set_default_executor(LanePool(max_workers=1))
        release = threading.Event()
        blocker = asyncio.ensure_future(asyncio.to_thread(release.wait, 30.0))  # holds the only worker
        clock = CallClock()
        queued = asyncio.ensure_future(_in_context(clock, lambda: None))
        await asyncio.sleep(0.02)
        assert (clock.jobs, clock.work_s()) == (1, 0.0)
        release.set()
        await asyncio.gather(blocker, queued)
        assert clock.queued_s > 0.0

    async def test_jobs_outside_a_lane_call_are_not_timed(self) -> None:
        """Without a clock in the context the pool behaves as a plain thread pool."""
        asyncio.get_running_loop().set_default_executor(LanePool(max_workers=1))
        assert current_clocks() == ()
        assert await asyncio.to_thread(lambda: 7) == 7

    def test_is_lane_pool_on_a_stock_loop(self) -> None:
        """A fresh loop's default executor is not a lane pool."""
        loop = asyncio.new_event_loop()
        try:
            assert not is_lane_pool(loop)
        finally:
            loop.close()


class TestHelpers:
    async def test_running_for_sets_and_restores_the_clocks(self) -> None:
        """Inside ``running_for`` the given clocks are current; afterwards the previous ones are."""
        a, b = CallClock(), CallClock()
        with running_for((a, b)):
            assert current_clocks() == (a, b)
        assert current_clocks() == ()

    def test_note_pending_counts_a_job_on_every_clock(self) -> None:
        """An awaited encoding counts as a job of each waiting call."""
        a, b = CallClock(), CallClock()
        note_pending((a, b))
        assert (a.jobs, b.jobs) == (1, 1)


def test_public_api() -> None:
    """The module's public names."""
    assert sorted(mod.__all__) == sorted(
        [
            "CallClock", "LanePool", "context_for", "current_clocks", "is_lane_pool", "note_pending", "run_queue_s",
            "running_for",
        ]
    )  # fmt: skip
