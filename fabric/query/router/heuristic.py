"""The heuristic router of the router policy: a priority cascade, first match wins.

======== ============================================================ =========== =====================
priority check                                                       route to    rule name
======== ============================================================ =========== =====================
1        regex ``(from|between|in) \\d{4}`` or "timeline", "history of"  Temporal    ``temporal_regex``
2        "connection between", "relationship", "how does X affect Y"  Graph       ``relational_phrase``
3        probe ``skewness < skew_max and max_score > max_score_min``  Graph       ``probe_flat``
4        always                                                       Dense       ``fallback``
======== ============================================================ =========== =====================

Rules 1 and 2 read the text only, so :func:`decide_text` answers without a probe; :func:`decide` needs the
probe's signals only when the text decided nothing. Thresholds, phrases and patterns come from
:class:`~fabric.settings.router.RouterConfig`: the seed's initial 0.5 / 0.65 for rule 3 were tuned to 0.5 / 1.01
(``fabric/config/router.toml``), so rule 3 does not fire with the shipped settings (the ``seed`` profile keeps
0.65).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fabric.core.strategies import Strategy
from fabric.query.router.signals import ProbeSignals
from fabric.settings.router import RouterConfig

__all__ = ["Decision", "decide", "decide_signals", "decide_text"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """A routing decision: the strategy, the rule that fired and why."""

    strategy: Strategy
    rule: str
    reason: str


def _phrase(text: str, phrases: tuple[str, ...]) -> str | None:
    low = text.lower()
    return next((p for p in phrases if p.lower() in low), None)


def decide_text(query: str, cfg: RouterConfig) -> Decision | None:
    """Rules 1 and 2 (the query's words); None when neither fires."""
    m = re.search(cfg.temporal_pattern, query, re.IGNORECASE)
    if m:
        return Decision(strategy=Strategy.TEMPORAL, rule="temporal_regex", reason=f"date constraint {m.group(0)!r}")
    phrase = _phrase(query, cfg.temporal_phrases)
    if phrase:
        return Decision(strategy=Strategy.TEMPORAL, rule="temporal_regex", reason=f"temporal phrase {phrase!r}")
    phrase = _phrase(query, cfg.relational_phrases)
    if phrase:
        return Decision(strategy=Strategy.GRAPH, rule="relational_phrase", reason=f"relational phrase {phrase!r}")
    m = re.search(cfg.relational_pattern, query, re.IGNORECASE)
    if m:
        return Decision(strategy=Strategy.GRAPH, rule="relational_phrase", reason=f"relational pattern {m.group(0)!r}")
    return None


def decide_signals(signals: ProbeSignals, cfg: RouterConfig) -> Decision:
    """Rules 3 and 4 (the probe's score distribution)."""
    if signals.skew < cfg.skew_max and signals.max > cfg.max_score_min:
        return Decision(
            strategy=Strategy.GRAPH,
            rule="probe_flat",
            reason=f"flat, confident probe (skew {signals.skew:.3f} < {cfg.skew_max}, "
            f"max {signals.max:.3f} > {cfg.max_score_min}): several relevant entities",
        )
    return Decision(strategy=Strategy.DENSE, rule="fallback", reason="no temporal, relational or probe signal")


def decide(query: str, signals: ProbeSignals | None, cfg: RouterConfig) -> Decision:
    """The whole cascade. ``signals`` may be None only if the text decides (else ``ValueError``)."""
    by_text = decide_text(query, cfg)
    if by_text is not None:
        return by_text
    if signals is None:
        raise ValueError("the probe's signals are needed: the query's text decided nothing")
    return decide_signals(signals, cfg)
