"""Constraint binding (seed 003, ``ConstraintBinder``): user constraints and pre-flight output → lane parameters.

The seed appends text such as ``site:edu`` to the query; here every constraint becomes a structured field of
:class:`~fabric.models.BoundConstraints` (date bounds, preferred domains, max results, search depth, budget
multiplier) that lanes apply as filters where their backend can, and the query text is left alone.

=====================  =====================================================================
constraint             bound parameters
=====================  =====================================================================
``time_range``         ``recent`` → last 2 years, ``5_years`` → last 5 years, ``all_time`` → none
``sources``            ``academic`` / ``news`` → ``preferred_domains``; ``both`` → none
``cost``               ``low``/``medium``/``high`` → ``budget_multiplier`` 0.5/1.0/2.0, ``max_results`` 10/20/50
``depth``              ``simple``/``technical``/``research`` → ``max_results`` 10/20/50, ``search_depth`` 1/2/3
``citations_required`` carried through
pre-flight             years → date bounds (intersected), ``site:`` → ``sites``, quotes → ``phrases``
=====================  =====================================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from fabric.models import BoundConstraints, Constraints, PreflightResult

__all__ = [
    "BUDGET_MULTIPLIERS",
    "COST_MAX_RESULTS",
    "DEPTH_PARAMETERS",
    "PREFERRED_DOMAINS",
    "TIME_RANGE_DAYS",
    "bind_constraints",
]

TIME_RANGE_DAYS: Mapping[str, int | None] = {"recent": 2 * 365, "5_years": 5 * 365, "all_time": None}
"""Days back from ``now`` for each ``time_range``."""

PREFERRED_DOMAINS: Mapping[str, tuple[str, ...]] = {
    "academic": ("edu", "ac.uk", "scholar.google.com"),
    "news": ("news.google.com", "reuters.com", "bbc.com"),
    "both": (),
}
"""Domains (or suffixes) preferred for each ``sources`` value (seed 003)."""

BUDGET_MULTIPLIERS: Mapping[str, float] = {"low": 0.5, "medium": 1.0, "high": 2.0}
"""Lane and total budget scale per ``cost``."""

COST_MAX_RESULTS: Mapping[str, int] = {"low": 10, "medium": 20, "high": 50}
"""Max results per ``cost`` (seed 003 ``cost_limits``)."""

DEPTH_PARAMETERS: Mapping[str, tuple[int, int]] = {"simple": (10, 1), "technical": (20, 2), "research": (50, 3)}
"""``depth`` → (max_results, search_depth in graph hops)."""


def _year_bounds(years: tuple[int, int]) -> tuple[datetime, datetime]:
    lo, hi = sorted(years)
    return datetime(lo, 1, 1, tzinfo=UTC), datetime(hi, 12, 31, 23, 59, 59, tzinfo=UTC)


def bind_constraints(
    constraints: Constraints,
    *,
    now: datetime,
    preflight: PreflightResult | None = None,
) -> BoundConstraints:
    """Turn user constraints (and pre-flight extractions) into structured lane parameters.

    Args:
        constraints: validated user constraints.
        now: reference time (UTC) for relative time ranges; passed in so binding is deterministic.
        preflight: pre-flight output; its years, sites and phrases are merged in when it was not bypassed.

    Returns:
        The bound parameters. When the user's time range and the query's years do not overlap, the
        query's explicit years win (they are the more specific wish).
    """
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    date_from: datetime | None = None
    date_to: datetime | None = None
    if constraints.time_range is not None:
        days = TIME_RANGE_DAYS[constraints.time_range]
        if days is not None:
            date_from, date_to = now - timedelta(days=days), now
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
    if preflight is not None and not preflight.bypassed:
        sites, phrases = preflight.sites, preflight.phrases
        if preflight.years is not None:
            y_from, y_to = _year_bounds(preflight.years)
            lo = max(y_from, date_from) if date_from else y_from
            hi = min(y_to, date_to) if date_to else y_to
            date_from, date_to = (lo, hi) if lo <= hi else (y_from, y_to)
    return BoundConstraints(
        date_from=date_from,
        date_to=date_to,
        preferred_domains=preferred,
        sites=sites,
        phrases=phrases,
        max_results=min(limits) if limits else None,
        search_depth=search_depth,
        budget_multiplier=multiplier,
        citations_required=constraints.citations_required,
    )
