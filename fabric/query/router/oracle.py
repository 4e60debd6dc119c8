"""Oracle labels of the router policy: the simplest strategy that is not beaten by a margin δ.

:func:`select_gold_label` is the router policy's algorithm line for line (scores keyed by strategy: Dense, Temporal,
Graph; ties within ε broken Dense > Temporal > Graph; a more complex strategy must beat the simpler ones by δ).
:func:`ablation` counts the labels for each δ of {0, 0.02, 0.05, 0.10}.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from fabric.core.strategies import STRATEGY_ORDER, Strategy

__all__ = ["ABLATION_DELTAS", "DEFAULT_DELTA", "DEFAULT_EPSILON", "ablation", "select_gold_label"]

DEFAULT_DELTA = 0.05
DEFAULT_EPSILON = 1e-6
ABLATION_DELTAS: tuple[float, ...] = (0.0, 0.02, 0.05, 0.10)


def select_gold_label(
    results: Mapping[str, float],
    *,
    delta: float = DEFAULT_DELTA,
    eps: float = DEFAULT_EPSILON,
) -> Strategy:
    """The gold strategy of one query from each strategy's score (nDCG@10 by default).

    ``results`` is keyed by :class:`Strategy` (a ``str`` enum, so ``"dense"`` keys work too).

    Raises:
        KeyError: a strategy's score is missing.
    """
    s_dense = float(results[Strategy.DENSE])
    s_temp = float(results[Strategy.TEMPORAL])
    s_graph = float(results[Strategy.GRAPH])

    best_score = max(s_dense, s_temp, s_graph)
    tied = [s for s, v in zip(STRATEGY_ORDER, (s_dense, s_temp, s_graph), strict=True) if abs(v - best_score) <= eps]
    best = next(s for s in STRATEGY_ORDER if s in tied)  # deterministic tie-break: Dense > Temporal > Graph

    if best is Strategy.DENSE:
        return Strategy.DENSE
    if best is Strategy.TEMPORAL:
        return Strategy.TEMPORAL if s_temp >= s_dense + delta else Strategy.DENSE
    if s_graph >= s_dense + delta and s_graph >= s_temp + delta:
        return Strategy.GRAPH
    if s_dense >= s_graph - delta:
        return Strategy.DENSE
    if s_temp >= s_graph - delta:
        return Strategy.TEMPORAL
    return Strategy.GRAPH


def ablation(
    per_query: Iterable[Mapping[str, float]], deltas: Sequence[float] = ABLATION_DELTAS
) -> dict[str, dict[str, int]]:
    """δ (formatted ``0.05``) → strategy → number of queries labelled so."""
    rows = list(per_query)
    out: dict[str, dict[str, int]] = {}
    for delta in deltas:
        counts = Counter(select_gold_label(r, delta=delta) for r in rows)
        out[f"{delta:.2f}"] = {s.value: counts.get(s, 0) for s in STRATEGY_ORDER}
    return out
