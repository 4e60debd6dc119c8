"""Reciprocal Rank Fusion: ``rrf(d) = Σ_lanes w_lane / (k + rank_lane(d))`` with 1-based ranks, k = 60.

Conventions (the one RRF function of the project; every mode and the ranking use it):

- ranks are 1-based: the first id of a lane has rank 1, so a lane contributes at most ``w / (k + 1)``;
- an id repeated inside one lane counts once, at its first (best) position, and the ranks after it close up,
  so a duplicate can never add RRF mass twice;
- scores are raw (not rescaled); :func:`rrf_ceiling` gives the largest attainable score for a set of lane
  weights (an item ranked first everywhere), which ranking uses to put RRF on [0, 1].
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

__all__ = ["DEFAULT_K", "fuse_rrf", "rrf_ceiling"]

DEFAULT_K = 60


def fuse_rrf(
    rankings: Mapping[str, Sequence[str]],
    *,
    k: int = DEFAULT_K,
    weights: Mapping[str, float] | None = None,
    ranks_out: dict[str, dict[str, int]] | None = None,
) -> dict[str, float]:
    """Fuse per-lane rankings (ids best first) into RRF scores.

    A duplicate id inside one lane counts once, at its best rank, so it cannot add RRF mass twice.

    Args:
        rankings: lane name → ids, best first (position 0 is rank 1).
        k: the RRF constant.
        weights: lane name → weight (default 1.0).
        ranks_out: when given, filled with id → {lane: 1-based rank used}.

    Returns:
        id → fused score (unsorted; callers sort with their explicit tie-break).

    Raises:
        ValueError: ``k`` is not positive.
    """
    if k <= 0:
        raise ValueError(f"k must be > 0, got {k}")
    scores: dict[str, float] = {}
    get = scores.get
    for lane, ids in rankings.items():
        w = 1.0 if weights is None else weights.get(lane, 1.0)
        seen: set[str] = set()
        rank = 0
        for doc_id in ids:
            if doc_id in seen:
                continue
            seen.add(doc_id)
            rank += 1
            scores[doc_id] = get(doc_id, 0.0) + w / (k + rank)
            if ranks_out is not None:
                ranks_out.setdefault(doc_id, {})[lane] = rank
    return scores


def rrf_ceiling(weights: Iterable[float], *, k: int = DEFAULT_K) -> float:
    """The largest RRF score attainable with these lane weights: ``Σ w / (k + 1)`` (rank 1 everywhere)."""
    return sum(max(w, 0.0) for w in weights) / (k + 1)
