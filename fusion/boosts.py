"""Boost stages: each puts one ranking factor on [0, 1] into ``candidate["scores"]``.

All values are pure functions of the candidates and the context (``ctx.now``; no clock):

- ``domain_diversity`` (the fusion policy): ``1 / n_domain``, where ``n_domain`` is how many candidates share the
  item's domain (a domain seen once scores 1.0, one seen four times 0.25). Items without a domain
  (local documents) score 0.5.
- ``recency`` (the fusion policy's age steps, age relative to ``ctx.now``): ≤ 1 day 1.0, ≤ 7 days 0.8, ≤ 30 days 0.6,
  ≤ 365 days 0.4, older 0.2; future dates count as age 0; undated items score 0.5.
- ``authority``: the ``fabric/config/authority.toml`` score of the item's domain or its closest listed parent domain
  (``en.wikipedia.org`` → ``wikipedia.org``), plus :data:`KEYLESS_BONUS` for keyless sources (Wikipedia, MDN),
  capped at 1.0; unlisted domains get ``ctx.authority_default``.

Both domain factors read only vouched-for domains (:func:`fusion.provenance.ranked_domains`): a stored entry's URL
counts when the operator vouched for it (trusted or operator content), a web lane's when the lane fetched it; any
other claimed URL counts as none, so it earns no authority the operator did not grant.
- ``quality``: ``min(1, q / QUALITY_GOOD)`` with ``q`` = :attr:`Hit.quality` computed once at ingest
  (:mod:`fusion.quality`) and ``QUALITY_GOOD = 0.8``; unknown scores 0.5. Quality demotes weak documents
  (fragments, boilerplate, number dumps) but does not rank good documents against each other: among documents
  that read well, quality differences are noise next to relevance (on SciFact, where 97 % of abstracts score
  ≥ 0.8, the raw value cost 0.0016 nDCG@10; saturated, the full ranking scores at least plain RRF).

Whether a factor carries information is decided later, in :mod:`fusion.rank` (a factor equal for every
candidate is dropped there, so it cannot reorder anything).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from fabric.settings import AuthorityEntry
from fusion.provenance import ranked_domains
from fusion.types import Candidates, FusionRun

__all__ = [
    "KEYLESS_BONUS",
    "QUALITY_GOOD",
    "RECENCY_STEPS",
    "UNKNOWN",
    "AuthorityBooster",
    "DomainDiversityBooster",
    "QualityBooster",
    "RecencyBooster",
    "authority_of",
    "recency_of",
]

QUALITY_GOOD = 0.8
"""Ingest-time quality at or above which a document counts as fully good for ranking."""
UNKNOWN = 0.5
"""The value of a factor for an item that lacks the information (no domain, no date, no quality)."""
KEYLESS_BONUS = 0.1
"""Added to the authority of keyless high-credibility sources (the fusion policy's keyless boosts)."""
RECENCY_STEPS: tuple[tuple[float, float], ...] = ((1.0, 1.0), (7.0, 0.8), (30.0, 0.6), (365.0, 0.4))
"""(max age in days, score) steps; anything older scores 0.2."""
_DAY_S = 86400.0
_STEP_SCORES = [0.2, *(score for _, score in reversed(RECENCY_STEPS))]
"""Recency score per ``bisect_right`` position among the step boundaries, oldest first."""
_STEP_AGES = [timedelta(days=limit) for limit, _ in reversed(RECENCY_STEPS)]
"""The steps' ages as timedeltas, oldest first (built once: a timedelta from float days is slow to make)."""


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def recency_of(published_at: datetime | None, now: datetime) -> float:
    """The fusion policy's age-step recency score of one date relative to ``now`` (undated → 0.5)."""
    if published_at is None:
        return UNKNOWN
    if published_at.tzinfo is None or now.tzinfo is None:  # naive times are taken as UTC, never a crash
        published_at, now = _utc(published_at), _utc(now)
    age_days = (now - published_at).total_seconds() / _DAY_S
    for limit, score in RECENCY_STEPS:
        if age_days <= limit:
            return score
    return 0.2


def authority_of(domain: str, table: Mapping[str, AuthorityEntry], default: float) -> float:
    """Authority of ``domain``: its entry or its closest listed parent's, keyless bonus included, capped at 1."""
    get = table.get
    d = domain.lower()
    while d:
        entry = get(d)
        if entry is not None:
            return min(1.0, entry.score + (KEYLESS_BONUS if entry.keyless else 0.0))
        _, _, d = d.partition(".")
    return default


def _recency_edges(now: datetime) -> list[datetime]:
    """The step boundaries ``now - limit``, oldest first (``bisect_right`` position → :data:`_STEP_SCORES`).

    Raises:
        OverflowError: a boundary falls before year 1.
    """
    return [now - age for age in _STEP_AGES]


def _recency_column(dates: list[datetime | None], now: datetime) -> list[float]:
    """:func:`recency_of` for every date, by comparing each date with the step boundaries ``now - limit``.

    ``age ≤ limit`` (in float days, as :func:`recency_of` computes it) holds exactly when ``date ≥ now - limit``:
    ages are whole microseconds, and a microsecond past a boundary still shows in the float quotient.
    """
    try:
        if now.tzinfo is not None:
            edges = _recency_edges(now)
            return [UNKNOWN if p is None else _STEP_SCORES[bisect_right(edges, p)] for p in dates]
    except (TypeError, OverflowError):  # a naive date among aware ones, or a boundary before year 1
        pass
    return [recency_of(p, now) for p in dates]


class DomainDiversityBooster:
    """Stage: ``domain_diversity = 1 / (candidates sharing the domain)``; no domain → 0.5."""

    name = "domain_diversity"

    def __call__(self, cands: Candidates, run: FusionRun) -> Candidates:
        """Score every candidate's domain diversity (vouched-for domains only)."""
        domains = ranked_domains(cands)
        if not any(domains):  # no item has a domain: every one is unknown
            cands.factors[self.name] = [UNKNOWN] * len(domains)
            return cands
        counts = Counter(domains)
        cands.factors[self.name] = [1.0 / counts[d] if d else UNKNOWN for d in domains]
        return cands


class RecencyBooster:
    """Stage: the fusion policy's age-step recency relative to ``ctx.now``."""

    name = "recency"

    def __call__(self, cands: Candidates, run: FusionRun) -> Candidates:
        """Score every candidate's recency."""
        dates = [h.published_at for h in cands.hits]
        if not any(dates):  # nothing dated: every item is unknown
            cands.factors[self.name] = [UNKNOWN] * len(dates)
            return cands
        cands.factors[self.name] = _recency_column(dates, run.ctx.now)
        return cands


class AuthorityBooster:
    """Stage: domain authority from ``ctx.authority`` with the keyless bonus."""

    name = "authority"

    def __call__(self, cands: Candidates, run: FusionRun) -> Candidates:
        """Score every candidate's source authority (vouched-for domains only)."""
        table, default = run.ctx.authority, run.ctx.authority_default
        domains = ranked_domains(cands)
        if not any(domains):  # no item has a domain: every one gets the default
            cands.factors[self.name] = [default] * len(domains)
            return cands
        memo = {d: authority_of(d, table, default) if d else default for d in set(domains)}
        cands.factors[self.name] = [memo[d] for d in domains]
        return cands


class QualityBooster:
    """Stage: ingest-time content quality saturated at :data:`QUALITY_GOOD` (unknown → 0.5)."""

    name = "quality"

    def __call__(self, cands: Candidates, run: FusionRun) -> Candidates:
        """Score every candidate's content quality: ``min(1, max(0, q) / QUALITY_GOOD)``."""
        good = QUALITY_GOOD
        cands.factors[self.name] = [
            UNKNOWN if q is None else 1.0 if q >= good else q / good if q > 0.0 else 0.0
            for q in [h.quality for h in cands.hits]
        ]
        return cands
