"""Skew-aware z-score normalisation of one lane's scores (fusion mode ``score_zscore``).

``norm(s) = clip((s − (μ − F·σ)) / ((F + Z) · σ), 0, 1)`` with the population mean ``μ`` and standard deviation
``σ`` of the lane's returned scores, ``F`` = :data:`FLOOR_SD` (1.5) and ``Z`` = :data:`CAP_SD` (6): the window
``[μ − 1.5σ, μ + 6σ]`` is mapped onto [0, 1]. A hit counts by how far it stands above its lane's average hit,
in standard deviations; a hit more than 1.5σ below the mean adds nothing (as if the lane had not returned it),
one at the mean adds 0.2, and one 6σ above the mean or more adds 1.

It is DBSF (``[μ − 3σ, μ + 3σ]``) with the window moved to fit a lane's top-k list, which is skewed: a few strong
hits stand far above a flat tail of weak ones. Why neither min-max nor DBSF (docs/ranking.md, "Choosing the
normalisation"):

- min-max pins each lane's *last* returned hit to 0 and its first to 1, so the scale depends on how deep the lane
  was asked and how long its tail of weak matches is (removing stopwords from the keyword query shortened that
  tail and cost SciFact 0.005 fused), and a lane whose best hit is barely ahead counts as much as one whose best
  hit stands out;
- DBSF's symmetric ±3σ window lifts every returned hit to about 0.5 just for being returned (a lane's many weak
  matches outweigh another lane's strong ones) and clips the strong hits together at 1;
- this window keeps a lane's *confidence* (a standout hit gets more than the best of a flat list) and keeps the
  tail ordered, so deep recall (R@100) is not lost.

Edge cases: an empty list gives ``[]``; a single item or equal scores (σ = 0) give 0.5 to every item (DBSF's
convention: no evidence either way); non-finite scores count as the lane's lowest finite score.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["CAP_SD", "FLOOR_SD", "normalise_zscore"]

FLOOR_SD = 1.5
"""Standard deviations below the lane mean that map to 0."""
CAP_SD = 6.0
"""Standard deviations above the lane mean that map to 1."""


def normalise_zscore(scores: Sequence[float], *, floor: float = FLOOR_SD, cap: float = CAP_SD) -> list[float]:
    """``clip((s − (μ − floor·σ)) / ((floor + cap)·σ), 0, 1)`` per score (empty → [], σ = 0 → all 0.5).

    Raises:
        ValueError: when ``floor`` is negative or ``floor + cap`` is not a positive finite number.
    """
    span_sd = floor + cap
    if not (floor >= 0.0 and span_sd > 0.0 and math.isfinite(span_sd)):
        raise ValueError(f"need floor >= 0 and a positive finite floor + cap, got floor={floor}, cap={cap}")
    if not scores:
        return []
    vals = list(scores)
    if not all(map(math.isfinite, vals)):
        good = [s for s in vals if math.isfinite(s)]
        low = min(good) if good else 0.0
        vals = [s if math.isfinite(s) else low for s in vals]
    n = len(vals)
    mean = sum(vals) / n
    sigma = math.sqrt(sum([(s - mean) ** 2 for s in vals]) / n)
    if sigma <= 0.0 or not math.isfinite(sigma):
        return [0.5] * n
    lo, span = mean - floor * sigma, span_sd * sigma
    # min(1.0, max(0.0, v)), spelt out: max keeps 0.0 unless v > 0.0 (NaN and -0.0 give 0.0), min keeps it below 1.0.
    return [(v if v < 1.0 else 1.0) if (v := (s - lo) / span) > 0.0 else 0.0 for s in vals]
