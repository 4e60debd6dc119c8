"""Paired significance over queries: the bootstrap interval and the randomisation test of a mean difference.

Two runs over the same judged queries give one difference per query (run A's metric minus run B's). The mean of
those differences is what a change moved; whether it could be noise is read from:

- the **paired bootstrap** interval: resample the queries with replacement ``resamples`` times, take the mean
  difference of each resample, and report the 2.5th and 97.5th percentiles (a 95 % interval; Efron & Tibshirani);
- the **paired randomisation test** (approximate, two-sided): under "no difference", each query's sign is
  arbitrary; flip every sign at random ``resamples`` times and count the means at least as far from zero as the
  observed one (Smucker, Allan & Carterette, CIKM 2007, the test recommended for IR). ``p_value`` adds one to both
  counts, so it is never 0.

Both use a fixed seed, so a report is reproducible. ranx offers the same tests; it stays out of the runtime path
(slow to import, numba), and ``tests/fabric/eval/test_stats.py`` checks these against textbook cases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["PairedTest", "paired_test"]

_CHUNK = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class PairedTest:
    """The outcome of :func:`paired_test`."""

    mean_delta: float
    ci_low: float
    ci_high: float
    p_value: float
    wins: int
    """Queries where A scored higher."""
    losses: int
    """Queries where A scored lower."""
    ties: int
    resamples: int

    def to_dict(self) -> dict[str, float | int | list[float]]:
        """JSON shape (rounded to 6 places)."""
        return {
            "mean_delta": round(self.mean_delta, 6),
            "ci95": [round(self.ci_low, 6), round(self.ci_high, 6)],
            "p_value": round(self.p_value, 6),
            "wins": self.wins,
            "losses": self.losses,
            "ties": self.ties,
            "resamples": self.resamples,
        }


def _chunks(total: int) -> list[int]:
    return [min(_CHUNK, total - start) for start in range(0, total, _CHUNK)]


def paired_test(a: Sequence[float], b: Sequence[float], *, resamples: int = 10_000, seed: int = 0) -> PairedTest:
    """Compare two runs' per-query values (same queries, same order).

    Args:
        a: run A's metric per query.
        b: run B's metric per query.
        resamples: bootstrap resamples and random sign flips (each).
        seed: the random generator's seed.

    Raises:
        ValueError: the runs differ in length, or are empty, or ``resamples`` < 1.
    """
    if len(a) != len(b) or not a:
        raise ValueError(f"paired runs need the same, non-zero number of queries (got {len(a)} and {len(b)})")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    n = diff.size
    observed = float(diff.mean())
    rng = np.random.default_rng(seed)
    means = np.concatenate([diff[rng.integers(0, n, size=(size, n))].mean(axis=1) for size in _chunks(resamples)])
    extreme = 0
    for size in _chunks(resamples):
        signs = rng.choice(np.array([-1.0, 1.0]), size=(size, n))
        extreme += int(np.count_nonzero(np.abs((signs * diff).mean(axis=1)) >= abs(observed) - 1e-12))
    eps = 1e-12
    return PairedTest(
        mean_delta=observed,
        ci_low=float(np.percentile(means, 2.5)),
        ci_high=float(np.percentile(means, 97.5)),
        p_value=(extreme + 1) / (resamples + 1),
        wins=int(np.count_nonzero(diff > eps)),
        losses=int(np.count_nonzero(diff < -eps)),
        ties=int(np.count_nonzero(np.abs(diff) <= eps)),
        resamples=resamples,
    )
