"""A fixed CPU workload timed in the eval's own process, so latency can be compared across noisy machines.

The latency gate divides each p95 by the median duration of this workload measured *during* the same run
(samples interleaved with the queries), and compares those unit-free ratios with the baseline's. A machine
that is uniformly 30 % slower, or busy with another job while the eval runs, slows the workload and the
queries alike, and the ratio stays put. See ``docs/eval.md``.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

__all__ = ["CalibrationClock", "calibration_sample"]

_N = 160


def calibration_sample() -> float:
    """Run the fixed workload once and return its wall time in ms.

    The workload mixes what a query costs: interpreted Python (the engine's own code) and a small dense
    matrix product (what the embedder and vector search spend their time on).
    """
    start = time.perf_counter()
    acc = 0
    for i in range(60_000):
        acc = (acc * 31 + i) % 1_000_003
    a = np.linspace(0.0, 1.0, _N * _N, dtype=np.float32).reshape(_N, _N)
    for _ in range(4):
        # einsum, not ``@``: a BLAS product here runs on OpenBLAS's thread pool, whose threads spin against any
        # other busy process, so one sample read 4 ms on a quiet machine and 38 ms beside one busy core, 9x, while
        # the queries it normalises moved by 1.3x. Single-threaded, it tracks the CPU the queries get.
        a = np.tanh(np.einsum("ij,kj->ik", a, a) / _N)
    if acc < 0 or not np.isfinite(a).all():  # keeps the work observable, never true
        raise RuntimeError("calibration workload broke")
    return (time.perf_counter() - start) * 1000.0


class CalibrationClock:
    """Collects calibration samples interleaved with a run; :attr:`unit_ms` is their median."""

    def __init__(self, every: int = 10) -> None:
        """Sample once every ``every`` calls to :meth:`tick` (and on :meth:`sample`)."""
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.every = every
        self.samples: list[float] = []
        self._ticks = 0

    def sample(self, n: int = 1) -> None:
        """Take ``n`` samples now."""
        for _ in range(n):
            self.samples.append(calibration_sample())

    def tick(self) -> None:
        """Count one query; sample when the count reaches a multiple of ``every``."""
        self._ticks += 1
        if self._ticks % self.every == 0:
            self.sample()

    @property
    def unit_ms(self) -> float | None:
        """Median sample in ms, or None before any sample."""
        return statistics.median(self.samples) if self.samples else None
