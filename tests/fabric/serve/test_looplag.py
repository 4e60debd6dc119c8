"""Tests for fabric.serve.looplag: the sampler's bookkeeping and its metrics (no timing assertions)."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry, generate_latest

from fabric.serve.looplag import LoopLag


async def _samples(lag: LoopLag, n: int) -> None:
    """Yield to the loop until the sampler holds ``n`` samples."""
    while lag.snapshot()["samples"] < n:  # noqa: ASYNC110 (the sampler has no event to wait on)
        await asyncio.sleep(0.001)


class TestLoopLag:
    def test_record_keeps_percentiles_and_the_peak(self) -> None:
        """Samples give p50/p95/max; reset clears the samples but the exported peak stays."""
        registry = CollectorRegistry()
        lag = LoopLag(registry=registry)
        for ms in range(1, 101):
            lag.record(float(ms))
        assert lag.snapshot() == {"samples": 100, "p50_ms": 51.0, "p95_ms": 96.0, "max_ms": 100.0}
        lag.reset()
        lag.record(5.0)
        assert lag.snapshot()["max_ms"] == 5.0
        text = generate_latest(registry).decode()
        assert "fabric_event_loop_lag_max_seconds 0.1" in text
        assert "fabric_event_loop_lag_seconds_count 101.0" in text

    def test_empty_snapshot(self) -> None:
        """No samples yet: zeros, not an error."""
        assert LoopLag().snapshot() == {"samples": 0, "p50_ms": 0.0, "p95_ms": 0.0, "max_ms": 0.0}

    async def test_sampler_runs_on_the_loop_until_stopped(self) -> None:
        """start() samples the running loop; a callback that blocks the loop shows up as lag; stop() ends it."""
        lag = LoopLag(interval_s=0.001)
        lag.start()
        lag.start()  # idempotent
        await _samples(lag, 3)
        before = lag.max_ms
        asyncio.get_running_loop().call_soon(lambda: sum(range(10_000_000)))  # holds the loop
        await _samples(lag, lag.snapshot()["samples"] + 3)
        assert lag.max_ms > before
        await lag.stop()
        stopped = lag.snapshot()["samples"]
        await asyncio.sleep(0.01)
        assert lag.snapshot()["samples"] == stopped
