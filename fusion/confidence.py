"""Lane confidence: a lane's fusion weight for one query from the absolute level of its own top score.

Score fusion normalises each lane's list on its own (:mod:`fusion.zscore`): a lane whose best hit barely matches
the query looks as sure of itself as one whose best hit matches it closely, because only the shape of the list
survives. For a lane whose scores have an absolute scale (the vector lanes' cosine similarity) the level says how
well the lane understood the query, so it sets the lane's weight for that query::

    factor = clip(1 + slope · (top score − reference), min, max)

With MiniLM the top cosine of a question that the corpus answers is about 0.6-0.7; a short or underspecified query
(a conversational turn, three words of a claim) reaches 0.4-0.5, where the vector lane trails the keyword lane the
most, and its weight falls with it, so a weak vector answer does not drag the keyword lane's down
(docs/ranking.md, "Lane confidence"). The factor multiplies the lane's weight as the provider penalty does, so
every fusion mode, the contributions and the lane report see the same weight.
"""

from __future__ import annotations

import math

from fabric.settings import LaneConfidence

__all__ = ["confidence_factor"]


def confidence_factor(top_score: float, calibration: LaneConfidence) -> float:
    """``clip(1 + slope · (top_score − reference), min, max)``; 1.0 for a non-finite score or a zero slope."""
    if calibration.slope == 0.0 or not math.isfinite(top_score):
        return 1.0
    factor = 1.0 + calibration.slope * (top_score - calibration.reference)
    return min(calibration.max, max(calibration.min, factor))
