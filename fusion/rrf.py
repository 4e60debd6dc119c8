"""Reciprocal Rank Fusion: ``rrf(d) = Σ_lanes w_lane / (k + rank_lane(d))`` with 1-based ranks, k = 60."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["DEFAULT_K", "fuse_rrf"]

DEFAULT_K = 60


def fuse_rrf(
    rankings: Mapping[str, Sequence[str]],
    *,
    k: int = DEFAULT_K,
    weights: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Fuse per-lane rankings (ids best first) into RRF scores.

    A duplicate id inside one lane counts once, at its best rank, so it cannot add RRF mass twice.

    Args:
        rankings: lane name → ids, best first (position 0 is rank 1).
        k: the RRF constant.
        weights: lane name → weight (default 1.0).

    Returns:
        id → fused score (unsorted; callers sort with their explicit tie-break).
    """
    if k <= 0:
        raise ValueError(f"k must be > 0, got {k}")
    scores: dict[str, float] = {}
    for lane, ids in rankings.items():
        w = 1.0 if weights is None else weights.get(lane, 1.0)
        if w == 0.0:
            continue
        seen: set[str] = set()
        rank = 0
        for doc_id in ids:
            if doc_id in seen:
                continue
            seen.add(doc_id)
            rank += 1
            scores[doc_id] = scores.get(doc_id, 0.0) + w / (k + rank)
    return scores
