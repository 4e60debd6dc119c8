"""Ranking: the seed-003 factors on one [0, 1] scale, a weighted mean, and the deterministic order.

Formula (weights from ``[fusion.factors]``, default 50/20/15/10/5)::

    fused  = base score of the fusion mode on [0, 1]          (rrf: rrf / Σ_lanes w_lane / (k + 1))
    F      = {f in domain_diversity, recency, authority, quality : f is not constant over the candidates}
    score_total = (w_rrf · fused + Σ_{f in F} w_f · f) / (w_rrf + Σ_{f in F} w_f)
    score_total = fused                                        when F is empty

Every factor is on [0, 1] (see :mod:`fusion.boosts`), so ``score_total`` is too, and RRF keeps its 50 %
share instead of being drowned by raw boosts (a raw RRF score is at most ≈ 0.033 per lane).

Neutrality: a factor that has the same value for every candidate (no dates at all, a single domain or
none, no authority entries, no quality) carries no information; it is dropped from ``F`` rather than
added as a constant, so it cannot move any item, not even through floating-point rounding. The order is
``(score_total desc, fused desc, stage_priority asc, best lane rank asc, id asc)``; ``fused`` only breaks
exact ties of ``score_total`` that rounding of the weighted mean could create. ``append_fill`` puts
``stage_priority`` first (stage-1 items always precede stage-2 fill).
"""

from __future__ import annotations

from itertools import compress
from operator import eq, lt, ne, neg

from fabric.core.models import FusionMode
from fabric.settings import FactorWeights
from fusion.types import Candidates, FusionRun

__all__ = ["FACTORS", "Ranker", "sort_key"]

FACTORS = ("domain_diversity", "recency", "authority", "quality")
"""Boost factors besides the fused base score, in the order of ``[fusion.factors]``."""


def sort_key(total: float, base: float, stage: int, best: int, item_id: str) -> tuple[float, float, int, int, str]:
    """The deterministic order: ``(score desc, fused desc, stage_priority asc, best rank asc, id asc)``."""
    return (-total, -base, stage, best, item_id)


class Ranker:
    """Stage: weighted mean of the informative factors, then the deterministic sort."""

    def __init__(self, weights: FactorWeights) -> None:
        """Keep the factor weights (negative weights are treated as 0)."""
        self.w_base = max(0.0, weights.rrf)
        self.weights = {f: max(0.0, getattr(weights, f)) for f in FACTORS}

    def informative(self, cands: Candidates) -> dict[str, float]:
        """Factors with a positive weight whose value differs between at least two candidates."""
        return {f: w for f, w in self.weights.items() if w > 0.0 and _varies(cands.factors[f])}

    def __call__(self, cands: Candidates, run: FusionRun) -> Candidates:
        """Set ``total`` on every candidate and the ranking order (``cands.order``)."""
        used = self.informative(cands)
        norm = self.w_base + sum(used.values())
        base = cands.base
        if not used or norm <= 0.0:
            cands.total = base
        else:
            cands.total = _weighted(self.w_base, base, [(w, cands.factors[f]) for f, w in used.items()], norm)
        if run.mode is not FusionMode.APPEND_FILL:
            order = _by_total(cands)
            if order is not None:
                cands.order = order
                return cands
        neg_total, neg_base = map(neg, cands.total), map(neg, base)
        if run.mode is FusionMode.APPEND_FILL:
            keys = zip(cands.stage, neg_total, neg_base, cands.best, cands.ids, range(len(cands)), strict=True)
        else:
            keys = zip(neg_total, neg_base, cands.stage, cands.best, cands.ids, range(len(cands)), strict=True)
        cands.order = [key[-1] for key in sorted(keys)]  # ids are distinct, so the row number never decides
        return cands


def _varies(column: list[float]) -> bool:
    """Whether two values of ``column`` differ (``list.count`` compares as a set would: identity, then ``==``)."""
    return bool(column) and column.count(column[0]) != len(column)


def _by_total(cands: Candidates) -> list[int] | None:
    """Rows in the full key's order, sorted on ``total`` and each run of equal totals on the rest of the key; None
    when a total, or the base of a row in a tie, is NaN (then the full sort's own comparisons decide).

    Sorting float keys uses the interpreter's float comparison directly, several times faster than comparing
    tuples. Rows whose totals differ are ordered by the total alone under the full key too, so only the rows of a
    tie (ranked next to each other) need the rest of it: ``(fused desc, stage_priority, best rank, id)``.
    """
    keys = list(map(neg, cands.total))
    order = sorted(range(len(keys)), key=keys.__getitem__)
    ranked = list(map(keys.__getitem__, order))
    if all(map(lt, ranked, ranked[1:])):
        return order
    if any(map(ne, ranked, ranked)):  # a NaN total: float comparisons do not order the list
        return None
    base, stage, best, ids = cands.base, cands.stage, cands.best, cands.ids
    tied = list(compress(range(len(ranked) - 1), map(eq, ranked, ranked[1:])))  # position p ties with p + 1
    start = 0
    for k, p in enumerate(tied):
        if k + 1 < len(tied) and tied[k + 1] == p + 1:
            continue  # the run goes on
        a, b = tied[start], p + 2  # positions a .. b - 1 hold one run of equal totals
        start = k + 1
        rows = order[a:b]
        if any(map(ne, map(base.__getitem__, rows), map(base.__getitem__, rows))):
            return None
        order[a:b] = sorted(rows, key=lambda i: (-base[i], stage[i], best[i], ids[i], i))
    return order


def _weighted(w_base: float, base: list[float], factors: list[tuple[float, list[float]]], norm: float) -> list[float]:
    """``(w_base · base + Σ w · factor) / norm`` per row, added left to right in factor order.

    One comprehension for the common numbers of factors (the same float operations, in the same order, as adding
    factor by factor).
    """
    if len(factors) == 4:
        (w1, f1), (w2, f2), (w3, f3), (w4, f4) = factors
        return [
            (w_base * b + w1 * a + w2 * c + w3 * d + w4 * e) / norm
            for b, a, c, d, e in zip(base, f1, f2, f3, f4, strict=True)
        ]
    if len(factors) == 3:
        (w1, f1), (w2, f2), (w3, f3) = factors
        return [(w_base * b + w1 * a + w2 * c + w3 * d) / norm for b, a, c, d in zip(base, f1, f2, f3, strict=True)]
    totals = [w_base * b for b in base]
    for w, column in factors:
        totals = [t + w * v for t, v in zip(totals, column, strict=True)]
    return [t / norm for t in totals]
