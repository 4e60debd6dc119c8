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

from fabric.config import FactorWeights
from fabric.models import FusionMode
from fusion.types import Candidate, FusionRun

__all__ = ["FACTORS", "Ranker", "sort_key"]

FACTORS = ("domain_diversity", "recency", "authority", "quality")
"""Boost factors besides the fused base score, in the order of ``[fusion.factors]``."""


def sort_key(c: Candidate) -> tuple[float, float, int, int, str]:
    """The deterministic order: ``(score desc, fused desc, stage_priority asc, best rank asc, id asc)``."""
    return (-c["total"], -c["base"], c["stage"], c["best"], c["id"])


def _staged_key(c: Candidate) -> tuple[int, float, float, int, str]:
    return (c["stage"], -c["total"], -c["base"], c["best"], c["id"])


class Ranker:
    """Stage: weighted mean of the informative factors, then the deterministic sort."""

    def __init__(self, weights: FactorWeights) -> None:
        """Keep the factor weights (negative weights are treated as 0)."""
        self.w_base = max(0.0, weights.rrf)
        self.weights = {f: max(0.0, getattr(weights, f)) for f in FACTORS}

    def informative(self, cands: list[Candidate]) -> dict[str, float]:
        """Factors with a positive weight whose value differs between at least two candidates."""
        out: dict[str, float] = {}
        for f, w in self.weights.items():
            if w <= 0.0 or not cands:
                continue
            values = {c["scores"][f] for c in cands}
            if len(values) > 1:
                out[f] = w
        return out

    def __call__(self, cands: list[Candidate], run: FusionRun) -> list[Candidate]:
        """Set ``total`` on every candidate and return them in ranking order."""
        used = self.informative(cands)
        norm = self.w_base + sum(used.values())
        if not used or norm <= 0.0:
            for c in cands:
                c["total"] = c["base"]
        else:
            totals = [self.w_base * c["base"] for c in cands]
            for f, w in used.items():  # factor by factor: one tight comprehension each
                totals = [t + w * c["scores"][f] for t, c in zip(totals, cands, strict=True)]
            for t, c in zip(totals, cands, strict=True):
                c["total"] = t / norm
        for c in cands:
            c["scores"]["fused"] = c["base"]
        keyed = list(map(_staged_key if run.mode is FusionMode.APPEND_FILL else sort_key, cands))
        return [cands[i] for i in sorted(range(len(cands)), key=keyed.__getitem__)]
