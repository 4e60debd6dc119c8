"""Tests for bulkheads: abandoned-call limits, the unproven-provider gate, the thread reserve."""

from __future__ import annotations

import asyncio

import pytest

from fabric.core.lanepool import LanePool
from fabric.core.models import LaneRequest, LaneStatus
from fabric.query.bulkhead import Bulkhead, reserve_threads
from fabric.query.executor import LaneExecutor, PlannedLane
from lanes.fake import FakeLane
from tests.fabric.query.test_executor import StubbornLane
from tests.support.settings import quiet_logs  # noqa: F401


def gate(proven: bool = False, unproven: int = 2) -> Bulkhead:
    return Bulkhead(max_abandoned=2, unproven_concurrency=unproven, is_proven=lambda _: proven)


class TestGate:
    async def test_unproven_provider_waits_then_times_out(self) -> None:
        """A full, unproven provider makes further callers wait and give up at their deadline."""
        b = gate()
        loop = asyncio.get_running_loop()
        assert await b.acquire("p", loop.time() + 1)
        assert await b.acquire("p", loop.time() + 1)
        assert not await b.acquire("p", loop.time() + 0.02)
        assert b.inflight("p") == 2

    async def test_release_lets_a_waiter_in(self) -> None:
        """Releasing a slot wakes a waiting caller."""
        b = gate(unproven=1)
        loop = asyncio.get_running_loop()
        await b.acquire("p", loop.time() + 1)
        waiter = asyncio.ensure_future(b.acquire("p", loop.time() + 5))
        await asyncio.sleep(0)
        b.release("p")
        assert await waiter

    async def test_proven_provider_is_not_limited(self) -> None:
        """A provider whose last outcome succeeded gets as many calls as asked."""
        b = gate(proven=True, unproven=1)
        loop = asyncio.get_running_loop()
        assert all([await b.acquire("p", loop.time() + 1) for _ in range(5)])

    def test_invalid_limits_rejected(self) -> None:
        """Limits below one are programmer errors."""
        with pytest.raises(ValueError, match=">= 1"):
            Bulkhead(max_abandoned=0, unproven_concurrency=1, is_proven=lambda _: True)


class TestExecutorGate:
    async def test_first_wave_to_hung_provider_spawns_few_calls(self) -> None:
        """Many concurrent queries to a new, hung provider start only unproven_concurrency calls."""
        lanes = {"s": StubbornLane(block_s=0.6), "a": FakeLane(name="a")}
        ex = LaneExecutor(lanes, unproven_concurrency=2, max_abandoned_per_provider=8)
        loop = asyncio.get_running_loop()
        plan = [PlannedLane(name="s", budget_ms=150), PlannedLane(name="a", budget_ms=150)]
        outs = await asyncio.gather(*(ex.run(plan, LaneRequest(query="q"), deadline=loop.time() + 1) for _ in range(6)))
        assert all(o["a"].status is LaneStatus.SUCCESS for o in outs)
        assert all(o["s"].status is LaneStatus.TIMEOUT for o in outs)
        assert ex.abandoned_total == 2
        await asyncio.wait(set(ex.abandoned))

    async def test_healthy_new_provider_serves_every_waiter(self) -> None:
        """Callers waiting on a new provider proceed once it proves healthy."""
        lane = FakeLane(name="a", delay_ms=5)
        ex = LaneExecutor({"a": lane}, unproven_concurrency=1)
        loop = asyncio.get_running_loop()
        plan = [PlannedLane(name="a", budget_ms=2000)]
        outs = await asyncio.gather(*(ex.run(plan, LaneRequest(query="q"), deadline=loop.time() + 5) for _ in range(8)))
        assert all(o["a"].status is LaneStatus.SUCCESS for o in outs)
        assert lane.calls == 8


class TestThreads:
    async def test_reserve_threads_enlarges_default_pool(self) -> None:
        """The loop's default pool gets the requested number of workers."""
        reserve_threads(40)
        loop = asyncio.get_running_loop()
        assert loop._default_executor._max_workers >= 40  # type: ignore[attr-defined]

    async def test_larger_pool_keeps_its_size_as_a_lane_pool(self) -> None:
        """A larger plain pool set by the application becomes a lane pool of its size (its jobs are then timed)."""
        from concurrent.futures import ThreadPoolExecutor

        loop = asyncio.get_running_loop()
        pool = ThreadPoolExecutor(max_workers=100)
        loop.set_default_executor(pool)
        reserve_threads(10)
        current = loop._default_executor  # type: ignore[attr-defined]
        assert isinstance(current, LanePool)
        assert current._max_workers == 100

    async def test_large_enough_lane_pool_is_kept(self) -> None:
        """A lane pool with enough workers is not replaced."""
        loop = asyncio.get_running_loop()
        pool = LanePool(max_workers=100)
        loop.set_default_executor(pool)
        reserve_threads(10)
        assert loop._default_executor is pool  # type: ignore[attr-defined]
