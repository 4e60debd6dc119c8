"""The five probe signals of the router policy, from a dense top-k's cosine scores and embeddings.

``skewness`` is the biased Fisher-Pearson coefficient that ``scipy.stats.skew(scores)`` returns by default
(``bias=True``): ``m3 / m2 ** 1.5`` with central moments over ``n``. Where scipy returns NaN
(``m2 <= (eps * mean) ** 2``: all scores equal, or a single score; or a spread so small that ``m2 ** 1.5``
underflows) this returns 0.0: a flat list is symmetric,
and a NaN would poison the classifier's batch norm and every threshold comparison.
Computed with numpy; the tests compare it with scipy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["SIGNAL_NAMES", "ProbeSignals", "compute_signals", "semantic_distance", "skewness"]

SIGNAL_NAMES = ("max", "min", "mean", "skew", "dist")
"""Signal order of the classifier's signal branch (the router policy: ``[max, min, mean, skew, dist]``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeSignals:
    """The probe's five floats."""

    max: float
    min: float
    mean: float
    skew: float
    dist: float | None
    """1 − cos(query, centroid of the retrieved embeddings); 1.0 when nothing was retrieved; None when it was not
    computed (the heuristic reads only the scores, so routing does not embed the probe's hits for it)."""

    def vector(self) -> list[float]:
        """``[max, min, mean, skew, dist]`` (the classifier's input: the distance must have been computed).

        Raises:
            ValueError: the distance was not computed.
        """
        if self.dist is None:
            raise ValueError("the probe's semantic distance was not computed")
        return [self.max, self.min, self.mean, self.skew, self.dist]

    def to_dict(self) -> dict[str, float | None]:
        """Name → value (``dist`` None when not computed)."""
        return dict(zip(SIGNAL_NAMES, [self.max, self.min, self.mean, self.skew, self.dist], strict=True))

    @classmethod
    def from_mapping(cls, data: Mapping[str, float | None]) -> ProbeSignals:
        """Inverse of :meth:`to_dict`."""
        scores = [data[name] for name in SIGNAL_NAMES[:4]]
        if any(v is None for v in scores):
            raise ValueError(f"signals without a score statistic: {dict(data)}")
        hi, lo, mean, skew = (float(v) for v in scores if v is not None)
        dist = data["dist"]
        return cls(max=hi, min=lo, mean=mean, skew=skew, dist=None if dist is None else float(dist))


def skewness(scores: Sequence[float]) -> float:
    """Biased sample skewness (``scipy.stats.skew`` with its defaults); 0.0 where scipy gives NaN."""
    x = np.asarray(scores, dtype=np.float64)
    if x.size == 0:
        return 0.0
    mean = float(np.mean(x))
    d = x - mean
    m2 = float(np.mean(d**2))
    if m2 <= (float(np.finfo(np.float64).eps) * mean) ** 2:
        return 0.0
    m3 = float(np.mean(d**3))
    scale = m2**1.5
    return float(m3 / scale) if scale > 0.0 else 0.0  # scale underflows for spreads near 1e-100


def semantic_distance(query: Sequence[float], docs: Sequence[Sequence[float]]) -> float:
    """``1 − cos(query, centroid(docs))``; 1.0 when there are no documents or a vector is zero."""
    if not docs:
        return 1.0
    q = np.asarray(query, dtype=np.float64)
    c = np.asarray(docs, dtype=np.float64).mean(axis=0)
    denom = float(np.linalg.norm(q) * np.linalg.norm(c))
    if denom == 0.0:
        return 1.0
    return 1.0 - float(q @ c) / denom


def compute_signals(
    scores: Sequence[float], query: Sequence[float] | None, docs: Sequence[Sequence[float]]
) -> ProbeSignals:
    """Signals of a probe's top-k ``scores`` (best first) and the embeddings of the same hits.

    No scores (an empty probe) gives zeros and distance 1.0: nothing retrieved, nothing peaked.
    """
    if not scores:
        return ProbeSignals(max=0.0, min=0.0, mean=0.0, skew=0.0, dist=1.0)
    x = np.asarray(scores, dtype=np.float64)
    dist = semantic_distance(query, docs) if query is not None else 1.0
    return ProbeSignals(
        max=float(np.max(x)), min=float(np.min(x)), mean=float(np.mean(x)), skew=skewness(scores), dist=dist
    )
