"""The ``[router]`` settings (``fabric/config/router.toml``), read by :mod:`fabric.settings` like every other section.

Thresholds of the heuristic cascade (the router policy: 0.5 and 0.65 are the policy's initial values), the phrases it
matches, which lanes each strategy runs, the oracle's margin δ and where the trained classifier is kept.
This module holds only the typed defaults and their checks: it imports nothing of the engine.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from fabric.core.errors import ConfigError
from fabric.core.strategies import ROUTES

__all__ = ["AUTO_CHOOSERS", "RouterConfig", "StrategyLanes", "validate_router_config"]

AUTO_CHOOSERS = ("heuristic", "classifier")
"""Who decides ``route = "auto"``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StrategyLanes:
    """Lanes each strategy runs (names of ``lanes.toml``); lanes not planned for a query are left out."""

    dense: tuple[str, ...] = ("keyword", "vector")
    temporal: tuple[str, ...] = ("keyword", "vector", "graph")
    """With the query's year range; a Temporal query without one runs Dense's lanes."""
    graph: tuple[str, ...] = ("keyword", "vector", "graph")


@dataclass(frozen=True, slots=True, kw_only=True)
class RouterConfig:
    """Router settings (the router policy)."""

    default_route: str = "all"
    """The route of a request that names none: ``all``, ``auto`` or a strategy name."""
    auto: str = "heuristic"
    """Who decides ``route = "auto"``: ``heuristic`` or ``classifier`` (needs a trained artifact)."""
    probe_lane: str = "vector"
    """The dense lane whose top ``probe_k`` scores are the probe (its hits are reused by the plan)."""
    probe_k: int = 10
    """Scores the signals are computed from (the router policy: top-k = 10)."""
    skew_max: float = 0.5
    """Rule 3: the probe is flat when its skewness is below this ..."""
    max_score_min: float = 1.01
    """... and confident when its max score is above this; flat and confident routes to Graph. The policy's initial
    value is 0.65; tuned on the fit split of the SciFact and CISI label files (``fabric router train``), rule 3
    paid nothing there, so 1.01 (above any cosine: it never fires) is the default (docs/router.md)."""
    temporal_pattern: str = r"\b(?:from|between|in)\s+\d{4}\b"
    """Rule 1 regex (case-insensitive): ``(from|between|in) <year>``."""
    temporal_phrases: tuple[str, ...] = ("timeline", "history of")
    """Rule 1 phrases (case-insensitive substrings)."""
    relational_phrases: tuple[str, ...] = ("connection between", "relationship")
    """Rule 2 phrases (case-insensitive substrings)."""
    relational_pattern: str = r"\bhow\s+(?:does|do|did|would|will|can)\s+.+?\s+affects?\b"
    """Rule 2 regex for "how does X affect Y" (case-insensitive)."""
    probe_alone: bool = False
    """Dense answers from the vector probe alone when the probe is confident (:attr:`probe_alone_margin`); the
    other Dense lanes then wait for the decision instead of starting with the probe."""
    probe_alone_margin: float = 0.15
    """The probe is confident when its top score beats the second by at least this (cosine)."""
    graph_weight: float | None = 0.35
    """Fusion weight of the lanes the Graph strategy adds to Dense's (the graph lane) when Graph runs; None keeps
    the lane's configured weight (a request's own ``weights`` always win)."""
    temporal_depth: int = 100
    """Temporal's hard year filter (:mod:`fabric.query.year_filter`): how many hits a lane that cannot apply the
    year range itself is asked for, so that the hits of other years dropped are made up for from deeper in its
    ranking (store lanes filter natively and go as deep as their store)."""
    delta: float = 0.05
    """Oracle margin δ."""
    epsilon: float = 1e-6
    """Oracle tie tolerance ε."""
    model_file: str = "router/classifier.pt"
    """Classifier artifact, relative to the home."""
    strategies: StrategyLanes = field(default_factory=StrategyLanes)


def _regex(pattern: str, src: str, key: str) -> None:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"invalid regular expression: {exc}", source=src, key=key) from None


def validate_router_config(cfg: RouterConfig, lanes: Mapping[str, object], src: str) -> RouterConfig:
    """Check values and lane names of a built :class:`RouterConfig`.

    Raises:
        ConfigError: naming ``router.<key>``.
    """
    if cfg.auto not in AUTO_CHOOSERS:
        raise ConfigError(
            f"unknown value {cfg.auto!r}; valid: {', '.join(AUTO_CHOOSERS)}", source=src, key="router.auto"
        )
    if cfg.default_route not in ROUTES:
        raise ConfigError(
            f"unknown value {cfg.default_route!r}; valid: {', '.join(ROUTES)}", source=src, key="router.default_route"
        )
    if cfg.probe_k < 2:
        raise ConfigError(f"must be >= 2, got {cfg.probe_k}", source=src, key="router.probe_k")
    if cfg.temporal_depth < 1:
        raise ConfigError(f"must be >= 1, got {cfg.temporal_depth}", source=src, key="router.temporal_depth")
    if cfg.graph_weight is not None and cfg.graph_weight < 0:
        raise ConfigError(f"must be >= 0, got {cfg.graph_weight}", source=src, key="router.graph_weight")
    for name in ("delta", "epsilon", "probe_alone_margin"):
        if getattr(cfg, name) < 0:
            raise ConfigError(f"must be >= 0, got {getattr(cfg, name)}", source=src, key=f"router.{name}")
    _regex(cfg.temporal_pattern, src, "router.temporal_pattern")
    _regex(cfg.relational_pattern, src, "router.relational_pattern")
    if lanes and cfg.probe_lane not in lanes:
        raise ConfigError(
            f"unknown lane {cfg.probe_lane!r}; valid: {', '.join(sorted(lanes))}", source=src, key="router.probe_lane"
        )
    for strategy in ("dense", "temporal", "graph"):
        names: tuple[str, ...] = getattr(cfg.strategies, strategy)
        if not names:
            raise ConfigError("must name at least one lane", source=src, key=f"router.strategies.{strategy}")
        for name in names:
            if lanes and name not in lanes:
                raise ConfigError(
                    f"unknown lane {name!r}; valid: {', '.join(sorted(lanes))}",
                    source=src,
                    key=f"router.strategies.{strategy}",
                )
    return cfg
