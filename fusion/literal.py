"""The fusion policy's formulas as written, and the staged-retrieval policy's order: the stage that ranks when the
configuration asks for either (:func:`policy_ranker`; otherwise :class:`fusion.rank.Ranker` ranks).

``[fusion.boosts]`` (the fusion policy's ``ReciprocalRankFusion.fuse_results``): every lane occurrence of an item
adds, besides its RRF term, ``domain / (n + 1)`` where ``n`` counts the candidates of the item's domain fused before
this occurrence (lanes in name order, each best rank first; the item itself counts once it was fused by an earlier
lane; items without a vouched-for domain share one), and ``recency × step(age)`` with the steps of
``recency_steps`` (the policy: 1, 0.5, 0.2 up to 1, 7, 30 days; older or undated: 0). The sum goes into the fused
score (``scores.fused``).

``[fusion] factor_scaling = "literal"`` (the policy's ``ResultRanker``)::

    fused       = raw RRF Σ w / (k + rank) + the additive boosts            (rrf mode; other modes keep their score)
    score_total = w_rrf · rrf + w_div · diversity + w_rec · recency + w_auth · authority + w_q · quality

with the raw RRF (at most ``w / (k + 1)`` per lane: the seed's ``calculate_rrf_score``), ``diversity = 1 / n``
over the candidates sharing the item's domain (items without a domain share one), the raw ingest quality
(unknown: 0.5), and recency and authority as :mod:`fusion.boosts` computes them. Every factor counts, constant or
not, and nothing is divided by the weights. Order: ``(score_total desc, fused desc, stage_priority, best rank,
id)``: equal totals keep the fused order, as the policy's stable sort over its fused list does.

``[fusion.stages] ranking = "fused"`` (the staged-retrieval policy's fusion modes): a staged fusion (``append_fill``,
or a stage-2 lane among the fused ones) is ordered by the fused score alone (no factors, no additive boosts) with
the deterministic tie-break ``(fused desc, stage_priority asc, best rank asc, id asc)``; ``append_fill`` puts
``stage_priority`` first, so stage 1's order is kept as it is and stage-2 items follow.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime

from fabric.core.models import FusionMode
from fabric.settings import AdditiveBoosts, FactorWeights, FusionConfig
from fusion.provenance import ranked_domains
from fusion.rank import FACTORS, Ranker
from fusion.types import Candidates, FusionRun, Stage

__all__ = ["PolicyRanker", "additive_boosts", "is_staged", "policy_ranker", "recency_step"]

_DAY_S = 86400.0


def recency_step(published_at: datetime | None, now: datetime, steps: Sequence[tuple[float, float]]) -> float:
    """The step of an item's age in days (``(max days, step)`` pairs in increasing age); older or undated: 0."""
    if published_at is None:
        return 0.0
    if published_at.tzinfo is None or now.tzinfo is None:  # naive times are taken as UTC
        published_at = published_at.replace(tzinfo=published_at.tzinfo or UTC)
        now = now.replace(tzinfo=now.tzinfo or UTC)
    age_days = (now - published_at).total_seconds() / _DAY_S
    return next((step for limit, step in steps if age_days <= limit), 0.0)


def additive_boosts(cands: Candidates, run: FusionRun, boosts: AdditiveBoosts) -> list[float]:
    """Each row's sum of the additive boosts over its lane occurrences, in fusion order (see the module docstring)."""
    n = len(cands)
    recency = [0.0] * n
    if boosts.recency:
        now, steps = run.ctx.now, boosts.recency_steps
        recency = [boosts.recency * recency_step(h.published_at, now, steps) for h in cands.hits]
    added = [0.0] * n
    domains = ranked_domains(cands)
    fused = [False] * n
    count: Counter[str] = Counter()
    for rows in cands.rows:  # lanes in name order, each lane's rows best rank first
        for j in rows:
            d = domains[j]
            added[j] += boosts.domain / (count[d] + 1) + recency[j]
            if not fused[j]:
                fused[j] = True
                count[d] += 1
    return added


def is_staged(run: FusionRun) -> bool:
    """Whether the fusion is staged: ``append_fill``, or a stage-2 lane among the usable ones."""
    return run.mode is FusionMode.APPEND_FILL or any(info.stage for info in run.lanes.values())


def _rrf(cands: Candidates) -> list[float]:
    """The raw weighted RRF of each row (the ``rrf`` column, or summed lane by lane from its terms)."""
    if cands.rrf:
        return cands.rrf
    weights, k = cands.rrf_terms if cands.rrf_terms is not None else ([1.0] * len(cands.rows), 60)
    sums = [0.0] * len(cands)
    for rows, w in zip(cands.rows, weights, strict=True):
        for rank, j in enumerate(rows, 1):
            sums[j] += w / (k + rank)
    return sums


class PolicyRanker:
    """Stage: raw fused score and additive boosts when configured, then the literal, normalised or fused-only order.

    Args:
        config: the fusion settings.
        staged: order by the fused score alone (the staged-retrieval policy's modes).
    """

    def __init__(self, config: FusionConfig, *, staged: bool) -> None:
        self.config = config
        self.staged = staged

    def __call__(self, cands: Candidates, run: FusionRun) -> Candidates:
        """Set ``base`` (fused), ``total`` and ``order`` as the configuration asks."""
        cfg = self.config
        literal = cfg.factor_scaling == "literal"
        if literal and run.mode is FusionMode.RRF:
            cands.base = list(_rrf(cands))
        if self.staged:
            cands.total = cands.base
            return _sorted(cands, run, cands.base)
        if cfg.boosts.domain or cfg.boosts.recency:
            cands.base = [b + a for b, a in zip(cands.base, additive_boosts(cands, run, cfg.boosts), strict=True)]
        if not literal:
            return Ranker(cfg.factors)(cands, run)
        cands.total = _literal_totals(cands, cfg.factors)
        return _sorted(cands, run, cands.total)


def _literal_totals(cands: Candidates, weights: FactorWeights) -> list[float]:
    """``w_rrf · rrf + Σ w_f · f`` per row, with the policy's diversity and raw quality (written to the factors)."""
    domains = ranked_domains(cands)
    counts = Counter(domains)
    cands.factors["domain_diversity"] = [1.0 / counts[d] for d in domains]
    cands.factors["quality"] = [0.5 if h.quality is None else h.quality for h in cands.hits]
    w_rrf = max(0.0, weights.rrf)
    totals = [w_rrf * r for r in _rrf(cands)]
    for f in FACTORS:
        w = max(0.0, getattr(weights, f))
        totals = [t + w * v for t, v in zip(totals, cands.factors[f], strict=True)]
    return totals


def _sorted(cands: Candidates, run: FusionRun, score: list[float]) -> Candidates:
    """Order rows by ``(score desc, fused desc, stage, best rank, id)``; ``append_fill`` puts the stage first."""
    base, stage, best, ids = cands.base, cands.stage, cands.best, cands.ids
    if run.mode is FusionMode.APPEND_FILL:
        keys = zip(stage, [-s for s in score], [-b for b in base], best, ids, range(len(cands)), strict=True)
    else:
        keys = zip([-s for s in score], [-b for b in base], stage, best, ids, range(len(cands)), strict=True)
    cands.order = [key[-1] for key in sorted(keys)]
    return cands


def policy_ranker(config: FusionConfig, run: FusionRun) -> Stage | None:
    """The ranking stage when the configuration departs from the normalised ranking, else None (see the module
    docstring)."""
    staged = config.stages.ranking == "fused" and is_staged(run)
    boosted = bool(config.boosts.domain or config.boosts.recency)
    if not staged and not boosted and config.factor_scaling != "literal":
        return None
    return PolicyRanker(config, staged=staged)
