"""Constraint binding (the fusion policy, ``ConstraintBinder``): user constraints and pre-flight output → lane
parameters.

The fusion policy appends text such as ``site:edu`` to the query; here every constraint becomes a structured field of
:class:`~fabric.core.models.BoundConstraints` (date bounds, preferred domains, max results, search depth, budget
multiplier) that lanes apply as filters where their backend can, and the query text is left alone.

What the user set explicitly (``time_range``, ``sources``, a ``site:`` operator) is hard. What pre-flight
infers from the words of a question is soft: a year in the text ("... in 1979 ...") becomes ``query_years``,
which lanes apply only to items that carry a publication date and deep-fill from the unfiltered ranking when it leaves
them short, and quoted words become ``phrases`` that lanes rank higher but never require. A natural-language
question thus never gets an empty answer because of an inferred filter. The one exception is the router's
Temporal strategy, which makes the query's years a hard filter (:func:`fabric.query.year_filter.hard_years`).

=====================  =====================================================================
constraint             bound parameters
=====================  =====================================================================
``time_range``         ``recent`` → last 2 years, ``5_years`` → last 5 years, ``all_time`` → none (or the last
                       ``[engine] all_time_years``: the policy's 10)
``sources``            ``academic`` / ``news`` → ``source_filter`` (hard: only those sources' hits reach fusion,
                       :mod:`fabric.query.source_filter`) and its ``preferred_domains``; ``both`` → none. With
                       ``[engine] source_binding = "sites"``, only the ``site:`` domains of the policy's query
                       modifier (:data:`SEED_SITES`) on every lane
``cost``               ``low``/``medium``/``high`` → ``budget_multiplier`` 0.5/1.0/2.0, ``max_results`` 10/20/50,
                       ``max_tokens`` 1000/2000/5000 (the returned text is cut to it, :mod:`fabric.query.answer_limits`)
``depth``              ``simple``/``technical``/``research`` → ``max_results`` 10/20/50, ``search_depth`` 1/2/3
``citations_required`` every returned item gets a citation-ready passage or is marked without one
pre-flight             years → ``query_years`` (soft), ``site:`` → ``sites``, quotes → ``phrases`` (soft)
=====================  =====================================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from fabric.core.models import BoundConstraints, Constraints, LaneKind, PreflightResult, SourceFilter, SourceKind
from fabric.settings import EngineConfig

__all__ = [
    "BUDGET_MULTIPLIERS",
    "COST_MAX_RESULTS",
    "COST_MAX_TOKENS",
    "DEPTH_PARAMETERS",
    "PREFERRED_DOMAINS",
    "SEED_SITES",
    "SOURCE_FILTERS",
    "TIME_RANGE_DAYS",
    "bind_constraints",
]

TIME_RANGE_DAYS: Mapping[str, int | None] = {"recent": 2 * 365, "5_years": 5 * 365, "all_time": None}
"""Days back from ``now`` for each ``time_range``."""

PREFERRED_DOMAINS: Mapping[str, tuple[str, ...]] = {
    "academic": ("edu", "ac.uk", "scholar.google.com", "arxiv.org", "pubmed.ncbi.nlm.nih.gov"),
    "news": ("news.google.com", "reuters.com", "bbc.com", "cnn.com", "nytimes.com"),
    "both": (),
}
"""Domains (or suffixes) of each ``sources`` value (the fusion policy's ``get_preferred_domains``)."""

SOURCE_FILTERS: Mapping[str, SourceFilter] = {
    "academic": SourceFilter(name="academic", domains=PREFERRED_DOMAINS["academic"], kinds=(SourceKind.IMPORT,)),
    "news": SourceFilter(name="news", domains=PREFERRED_DOMAINS["news"], lane_kinds=(LaneKind.NEWS,)),
}
"""What ``sources`` keeps: on web lanes the policy's domains; on the stores, imported corpora (``source_kind`` =
``import``: papers, abstracts, data sets) count as academic; a news lane's items count as news. ``both`` keeps all."""

SEED_SITES: Mapping[str, SourceFilter] = {
    "academic": SourceFilter(name="academic", domains=("edu", "ac.uk", "scholar.google.com")),
    "news": SourceFilter(name="news", domains=("news.google.com", "reuters.com", "bbc.com")),
}
"""What ``sources`` keeps with ``[engine] source_binding = "sites"``: the domains of the fusion policy's query modifier
(``site:edu OR site:ac.uk OR site:scholar.google.com``; ``site:news.google.com OR site:reuters.com OR site:bbc.com``),
whatever the lane."""

COST_MAX_TOKENS: Mapping[str, int] = {"low": 1000, "medium": 2000, "high": 5000}
"""Token budget of the returned text per ``cost`` (the fusion policy's ``cost_limits.max_tokens``)."""

BUDGET_MULTIPLIERS: Mapping[str, float] = {"low": 0.5, "medium": 1.0, "high": 2.0}
"""Lane and total budget scale per ``cost``."""

COST_MAX_RESULTS: Mapping[str, int] = {"low": 10, "medium": 20, "high": 50}
"""Max results per ``cost`` (the fusion policy's ``cost_limits``)."""

DEPTH_PARAMETERS: Mapping[str, tuple[int, int]] = {"simple": (10, 1), "technical": (20, 2), "research": (50, 3)}
"""``depth`` → (max_results, search_depth in graph hops)."""


def _date_bounds(time_range: str | None, now: datetime, all_time_years: int) -> tuple[datetime | None, datetime | None]:
    """The hard date bounds of ``time_range`` (``all_time``: the last ``all_time_years`` years, 0: none)."""
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    days = TIME_RANGE_DAYS[time_range] if time_range is not None else None
    if time_range is not None and days is None and all_time_years:  # the policy's get_date_from: 365 days a year
        days = 365 * all_time_years
    return (now - timedelta(days=days), now) if days is not None else (None, None)


def bind_constraints(
    constraints: Constraints,
    *,
    now: datetime,
    preflight: PreflightResult | None = None,
    engine: EngineConfig | None = None,
) -> BoundConstraints:
    """Turn user constraints (and pre-flight extractions) into structured lane parameters.

    Args:
        constraints: validated user constraints.
        now: reference time (UTC) for relative time ranges; passed in so binding is deterministic.
        preflight: pre-flight output; its years (soft), sites and phrases (soft) are merged in when it was not
            bypassed.
        engine: the ``[engine]`` settings (``all_time_years``, ``source_binding``); None: the defaults.

    Returns:
        The bound parameters. The user's time range stays the hard date bound; the query's years are carried
        as the soft ``query_years`` next to it.
    """
    engine = engine or EngineConfig()
    date_from, date_to = _date_bounds(constraints.time_range, now, engine.all_time_years)
    preferred = PREFERRED_DOMAINS.get(constraints.sources or "both", ())
    multiplier = BUDGET_MULTIPLIERS.get(constraints.cost or "medium", 1.0)
    limits: list[int] = []
    if constraints.cost is not None:
        limits.append(COST_MAX_RESULTS[constraints.cost])
    search_depth = 1
    if constraints.depth is not None:
        max_results, search_depth = DEPTH_PARAMETERS[constraints.depth]
        limits.append(max_results)
    sites: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()
    query_years: tuple[int, int] | None = None
    if preflight is not None and not preflight.bypassed:
        sites, phrases = preflight.sites, preflight.phrases
        if preflight.years is not None:
            lo, hi = sorted(preflight.years)
            query_years = (lo, hi)
    return BoundConstraints(
        date_from=date_from,
        date_to=date_to,
        query_years=query_years,
        preferred_domains=preferred,
        sites=sites,
        phrases=phrases,
        source_filter=(SEED_SITES if engine.source_binding == "sites" else SOURCE_FILTERS).get(
            constraints.sources or ""
        ),
        max_results=min(limits) if limits else None,
        search_depth=search_depth,
        budget_multiplier=multiplier,
        max_tokens=COST_MAX_TOKENS[constraints.cost] if constraints.cost is not None else None,
        citations_required=constraints.citations_required,
    )
