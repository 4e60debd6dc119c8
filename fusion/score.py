"""Per-lane score normalisation for weighted score fusion (``score_minmax``, ``score_dbsf``, ``score_zscore``).

Lanes score on incomparable scales (BM25 is unbounded, cosine lies in [-1, 1], graph scores decay per hop),
so each lane's native scores are mapped to [0, 1] over that lane's own result list, then fused as
``Σ_lanes w_lane · norm_lane(d)`` (CombSUM), optionally times the number of lanes that returned ``d``
(CombMNZ). The largest attainable fused score is ``Σ w`` (× the lane count for CombMNZ).

- min-max: ``(s - min) / (max - min)``. An empty list gives nothing; a single item or a list whose scores
  are all equal gives 1.0 to every item (each is at the lane's maximum).
- distribution-based (DBSF): ``(s - (μ - 3σ)) / 6σ`` clipped to [0, 1], with the population mean and
  standard deviation of the lane's scores. A single item or equal scores (σ = 0) give 0.5 to every item
  (each is at the lane's mean). Non-finite scores are treated as the lane's lowest finite score.
- skew-aware z-score (:mod:`fusion.zscore`): ``clip((s - (μ - 1.5σ)) / 7.5σ, 0, 1)``; σ = 0 gives 0.5.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from fusion.zscore import normalise_zscore

__all__ = ["NORMALISERS", "fuse_scores", "normalise_dbsf", "normalise_minmax"]


def _finite(scores: Sequence[float]) -> list[float]:
    if all(map(math.isfinite, scores)):
        return list(scores)
    good = [s for s in scores if math.isfinite(s)]
    low = min(good) if good else 0.0
    return [s if math.isfinite(s) else low for s in scores]


def normalise_minmax(scores: Sequence[float]) -> list[float]:
    """Min-max normalise one lane's scores to [0, 1] (empty → [], single/equal → all 1.0)."""
    if not scores:
        return []
    vals = _finite(scores)
    lo, hi = min(vals), max(vals)
    if hi <= lo:
        return [1.0] * len(vals)
    span = hi - lo
    return [(s - lo) / span for s in vals]


def normalise_dbsf(scores: Sequence[float]) -> list[float]:
    """Distribution-based normalisation: ``(s - (μ-3σ)) / 6σ`` clipped to [0, 1] (σ = 0 → all 0.5)."""
    if not scores:
        return []
    vals = _finite(scores)
    n = len(vals)
    mean = sum(vals) / n
    sigma = math.sqrt(sum([(s - mean) ** 2 for s in vals]) / n)
    if sigma <= 0.0 or not math.isfinite(sigma):
        return [0.5] * n
    lo, span = mean - 3.0 * sigma, 6.0 * sigma
    return [(v if v < 1.0 else 1.0) if (v := (s - lo) / span) > 0.0 else 0.0 for s in vals]  # clipped as in zscore


NORMALISERS: dict[str, Callable[[Sequence[float]], list[float]]] = {
    "score_minmax": normalise_minmax,
    "score_dbsf": normalise_dbsf,
    "score_zscore": normalise_zscore,
}
"""Fusion mode value → per-lane normaliser."""


def fuse_scores(norm: dict[str, float], weights: dict[str, float], *, combmnz: bool = False) -> float:
    """Weighted CombSUM of one item's normalised lane scores (× lane count with ``combmnz``)."""
    total = 0.0
    for lane, value in norm.items():
        total += weights.get(lane, 1.0) * value
    return total * len(norm) if combmnz else total
