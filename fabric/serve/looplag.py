"""Event-loop lag, measured by the process itself: how late a timer fires is how long every request waited.

:class:`LoopLag` runs one task that sleeps ``interval_s`` and records how much later than asked it woke up: a
callback that holds the loop (blocking I/O, a long computation, a parse of a large body) shows as lag, however the
request that paid for it was timed. The service starts one and exports it in ``/metrics``:

- ``fabric_event_loop_lag_seconds`` (histogram of every sample) and ``fabric_event_loop_lag_max_seconds`` (the
  largest since start-up); ``max_ms`` and :meth:`LoopLag.snapshot` read the same figures in process (tests and
  ``fabric bench ingest_http`` compare an ingest's lag with an idle loop's).

Nothing runs at import; :meth:`LoopLag.start` needs a running loop.
"""

from __future__ import annotations

import asyncio
import time

from prometheus_client import CollectorRegistry, Gauge, Histogram

from fabric.core.cancel import cancel_and_wait

__all__ = ["LoopLag"]

_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class LoopLag:
    """Samples the running loop's lag every ``interval_s`` (see the module docstring).

    Args:
        interval_s: the sampling period (a sample is the sleep's overshoot).
        registry: where the metrics live (the engine's, so ``/metrics`` shows them); a private one when None.
    """

    def __init__(self, *, interval_s: float = 0.02, registry: CollectorRegistry | None = None) -> None:
        self.interval_s = interval_s
        self.samples: list[float] = []
        """Every sample's lag in ms since start (or the last :meth:`reset`), oldest first (capped)."""
        self.max_ms = 0.0
        """The largest lag seen since start (or the last :meth:`reset`), in ms."""
        self._task: asyncio.Task[None] | None = None
        self._peak_s = 0.0
        r = registry or CollectorRegistry()
        self._hist = Histogram("fabric_event_loop_lag_seconds", "Event-loop lag samples", buckets=_BUCKETS, registry=r)
        self._max = Gauge("fabric_event_loop_lag_max_seconds", "Largest event-loop lag since start", registry=r)

    def start(self) -> None:
        """Start sampling on the running loop (idempotent)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="loop-lag")

    async def stop(self) -> None:
        """Stop sampling."""
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait(task)

    def reset(self) -> None:
        """Forget the samples and the maximum (the metrics keep counting)."""
        self.samples.clear()
        self.max_ms = 0.0

    def snapshot(self) -> dict[str, float | int]:
        """``samples``, ``p50_ms``, ``p95_ms`` and ``max_ms`` of the samples so far."""
        ordered = sorted(self.samples)
        if not ordered:
            return {"samples": 0, "p50_ms": 0.0, "p95_ms": 0.0, "max_ms": 0.0}

        def pick(q: float) -> float:
            return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

        return {"samples": len(ordered), "p50_ms": pick(0.5), "p95_ms": pick(0.95), "max_ms": round(self.max_ms, 2)}

    async def _run(self) -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(self.interval_s)
            lag_s = max(0.0, time.perf_counter() - t0 - self.interval_s)
            self.record(lag_s * 1000.0)

    def record(self, lag_ms: float) -> None:
        """Record one sample (the sampler calls it; public so the bookkeeping is testable without timing)."""
        if len(self.samples) < 1_000_000:
            self.samples.append(lag_ms)
        self._hist.observe(lag_ms / 1000.0)
        self.max_ms = max(self.max_ms, lag_ms)
        if lag_ms / 1000.0 > self._peak_s:  # the gauge survives reset(): the largest since start-up
            self._peak_s = lag_ms / 1000.0
            self._max.set(self._peak_s)
