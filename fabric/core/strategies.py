"""Strategies, routes and the route record a result carries (the router policy).

A *strategy* is a lane plan (``[router.strategies]``): **Dense** (keyword + vector as shipped, the cheapest strong
plan), **Temporal** (with the query's year range as a hard filter, pulled deep, plus the graph lane), **Graph**
(Dense plus 1-hop graph evidence). A *route* is what a request asks for: ``all`` (every planned lane, the
federation), ``auto`` (the router decides) or a strategy name (forced); a request that names none gets
``[router] default_route``, ``auto`` in the shipped ``fabric/config/router.toml`` (``all`` in settings built in code).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ROUTES",
    "ROUTE_ALL",
    "ROUTE_AUTO",
    "STRATEGY_ORDER",
    "RouteRecord",
    "Strategy",
]


class Strategy(enum.StrEnum):
    """A lane plan the router can choose; the order of :data:`STRATEGY_ORDER` is the simplicity order of the oracle
    labels."""

    DENSE = "dense"
    TEMPORAL = "temporal"
    GRAPH = "graph"


STRATEGY_ORDER: tuple[Strategy, ...] = (Strategy.DENSE, Strategy.TEMPORAL, Strategy.GRAPH)
"""Simplest first (the router policy's hierarchy 0..2); also the class index order of the classifier."""

ROUTE_ALL = "all"
ROUTE_AUTO = "auto"
ROUTES: tuple[str, ...] = (ROUTE_AUTO, ROUTE_ALL, *(s.value for s in STRATEGY_ORDER))
"""Values a request's ``route`` field accepts."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteRecord:
    """How a query was routed, for the result JSON (``route`` section)."""

    route: str
    """What the request asked: ``all``, ``auto`` or a strategy name."""
    strategy: str
    """The plan that ran: a strategy name, or ``all``."""
    chooser: str
    """Who chose: ``request`` (forced or ``all``), ``heuristic`` or ``classifier``."""
    rule: str
    """The rule (``temporal_regex``, ``relational_phrase``, ``probe_flat``, ``fallback``) or model that chose."""
    reason: str
    """One human-readable sentence."""
    lanes: tuple[str, ...] = ()
    """Lanes of the plan."""
    lane_calls: int = 0
    """Lane invocations spent on the query (the probe included; a reused probe is counted once)."""
    signals: Mapping[str, float | None] | None = None
    """The probe's five signals when a probe ran."""
    probabilities: Mapping[str, float] | None = None
    """Classifier class probabilities, when the classifier chose."""
    year_filter: tuple[int, int] | None = None
    """The year range applied as a filter (Temporal)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Anything else worth recording (probe reuse, deep fill)."""

    def to_dict(self) -> dict[str, Any]:
        """The ``route`` section of the result JSON."""
        return {
            "route": self.route,
            "strategy": self.strategy,
            "chooser": self.chooser,
            "rule": self.rule,
            "reason": self.reason,
            "lanes": list(self.lanes),
            "lane_calls": self.lane_calls,
            "signals": (
                {k: None if v is None else round(v, 6) for k, v in self.signals.items()}
                if self.signals is not None
                else None
            ),
            "probabilities": (
                {k: round(v, 6) for k, v in self.probabilities.items()} if self.probabilities is not None else None
            ),
            "year_filter": list(self.year_filter) if self.year_filter else None,
            **dict(self.extra),
        }

    @classmethod
    def federation(cls, lanes: Sequence[str]) -> RouteRecord:
        """The record of the default route: every planned lane ran."""
        return cls(
            route=ROUTE_ALL,
            strategy=ROUTE_ALL,
            chooser="request",
            rule="route=all",
            reason="every planned lane (the full federation)",
            lanes=tuple(lanes),
            lane_calls=len(lanes),
        )
