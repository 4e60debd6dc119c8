"""The data model's vocabulary: its closed sets of values (modes, lane kinds, statuses, provenance, trust,
fusion modes), a shared empty mapping, the user's constraints and their bound form, and the UTC timestamp
format of results.

Standard library only; :mod:`fabric.core.models` builds on it and re-exports every name, so callers import them
from either module.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Self

__all__ = [
    "EMPTY_MAPPING",
    "BoundConstraints",
    "Constraints",
    "FusionMode",
    "LaneKind",
    "LaneStatus",
    "Mode",
    "SourceFilter",
    "SourceKind",
    "Trust",
    "iso_utc",
]


EMPTY_MAPPING: Mapping[str, Any] = MappingProxyType({})
"""A shared read-only empty mapping (default metadata and health)."""


class _ChoiceEnum(enum.StrEnum):
    """A closed set of string values whose ``from_str`` names the valid ones on error."""

    @classmethod
    def from_str(cls, value: str) -> Self:
        """Parse ``value`` (case-insensitive) or raise ``ValueError`` listing the valid values."""
        try:
            return cls(value.strip().lower())
        except ValueError:
            valid = ", ".join(m.value for m in cls)
            raise ValueError(f"unknown {cls.__name__} {value!r}; valid: {valid}") from None


class Mode(_ChoiceEnum):
    """Query mode; it selects the per-lane budgets of ``fabric/config/modes.toml``."""

    SIMPLE = "simple"
    TECHNICAL = "technical"
    RESEARCH = "research"
    MULTIMEDIA = "multimedia"


class LaneKind(_ChoiceEnum):
    """What a lane retrieves from; the folder of its adapter under ``lanes/``."""

    KEYWORD = "keyword"
    VECTOR = "vector"
    GRAPH = "graph"
    WEB = "web"
    NEWS = "news"
    MARKETS = "markets"


class LaneStatus(_ChoiceEnum):
    """How one planned lane ended for one query."""

    SUCCESS = "success"
    TIMEOUT = "timeout"
    ERROR = "error"
    SKIPPED = "skipped"
    SUSPENDED = "suspended"
    FALLBACK = "fallback"


class SourceKind(_ChoiceEnum):
    """Provenance class of a chunk (the docs-memory policy)."""

    OPERATOR = "operator"
    TOOL = "tool"
    WEB = "web"
    IMPORT = "import"
    SYSTEM = "system"


class Trust(_ChoiceEnum):
    """Whether a source is trusted (operator-authored) or not (web, imports)."""

    TRUSTED = "trusted"
    UNTRUSTED = "untrusted"


class FusionMode(_ChoiceEnum):
    """How lane rankings are combined (see ``fusion/``)."""

    RRF = "rrf"
    APPEND_FILL = "append_fill"
    SCORE_MINMAX = "score_minmax"
    SCORE_DBSF = "score_dbsf"
    SCORE_ZSCORE = "score_zscore"


def iso_utc(value: datetime | None) -> str | None:
    """Format a datetime as ``YYYY-MM-DDTHH:MM:SSZ`` in UTC, or None."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True, kw_only=True)
class Constraints:
    """User constraints from the guided-prompt step (the fusion policy, ConstraintBinder). None means unset."""

    time_range: str | None = None
    """``recent`` (2 years), ``5_years`` or ``all_time``."""
    sources: str | None = None
    """``academic``, ``news`` or ``both``."""
    cost: str | None = None
    """``low`` (budget × 0.5), ``medium`` (× 1.0) or ``high`` (× 2.0)."""
    depth: str | None = None
    """``simple``, ``technical`` or ``research``: max results and graph traversal depth."""
    citations_required: bool = False
    """Whether every returned item must come with a citation-ready passage (items without one are marked)."""

    TIME_RANGES = ("recent", "5_years", "all_time")
    SOURCES = ("academic", "news", "both")
    COSTS = ("low", "medium", "high")
    DEPTHS = ("simple", "technical", "research")


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceFilter:
    """Which hits the ``sources`` constraint keeps (see :mod:`fabric.query.source_filter`).

    A hit is kept when its domain is one of ``domains`` (or a sub-domain of one; ``edu`` matches ``mit.edu``),
    when a store lane (keyword, vector, graph) returns it with a ``source_kind`` in ``kinds``, or when the lane
    that returned it is of a kind in ``lane_kinds`` (a news feed for ``news``).
    """

    name: str
    """The constraint value (``academic``, ``news``)."""
    domains: tuple[str, ...] = ()
    kinds: tuple[SourceKind, ...] = ()
    lane_kinds: tuple[LaneKind, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class BoundConstraints:
    """Constraints turned into structured lane parameters (output of constraint binding)."""

    date_from: datetime | None = None
    """Inclusive lower bound on ``published_at``; None for no bound."""
    date_to: datetime | None = None
    """Inclusive upper bound on ``published_at``; None for no bound."""
    query_years: tuple[int, int] | None = None
    """Year range inferred from the query text (pre-flight): a soft filter. Lanes rank items published inside it
    or undated first and deep-fill from the unfiltered ranking (items published outside come last); never a hard
    constraint, and years a text only mentions do not date it (Temporal's hard filter is :attr:`year_filter`)."""
    year_filter: tuple[int, int] | None = None
    """The temporal route's year range as a hard filter (set by the router only, never by binding): an item passes
    when a year it mentions or its publication year is in the range, or when it is undated and mentions no year.
    Lanes get the range as :attr:`query_years` too (the matching items first, over the whole store); the executor
    drops whatever fails it (:mod:`fabric.query.year_filter`)."""
    year_depth: int = 0
    """With :attr:`year_filter`: how many hits every lane is asked for, so that the hits dropped are made up for
    from deeper in its ranking (``[router] temporal_depth``)."""
    preferred_domains: tuple[str, ...] = ()
    """Domains (or suffixes such as ``edu``) of the ``sources`` constraint (also part of ``source_filter``)."""
    source_filter: SourceFilter | None = None
    """The ``sources`` constraint: only hits of these sources reach fusion (None for ``both`` or unset)."""
    sites: tuple[str, ...] = ()
    """Domains from ``site:`` operators: a hard filter where the lane supports it."""
    phrases: tuple[str, ...] = ()
    """Quoted phrases from the query text: lanes that can match phrases rank them higher (never required)."""
    max_results: int | None = None
    """Upper bound on hits a lane should return (from ``cost`` / ``depth``)."""
    search_depth: int = 1
    """Graph traversal depth in hops (from ``depth``)."""
    budget_multiplier: float = 1.0
    """Scales every lane budget and the total budget (from ``cost``)."""
    max_tokens: int | None = None
    """Token budget of the returned text (from ``cost``): the page is cut to it (:mod:`fabric.query.answer_limits`)."""
    citations_required: bool = False
    """Each returned item carries a citation-ready passage, or is marked as having none."""
