"""Tests for the offline replay of the heuristic over label rows."""

from __future__ import annotations

from fabric.settings.router import RouterConfig
from tools.router.tuning import replay_heuristic, threshold_grid

FLAT = {"max": 0.8, "min": 0.7, "mean": 0.75, "skew": 0.1, "dist": 0.2}
PEAKED = {"max": 0.8, "min": 0.2, "mean": 0.3, "skew": 2.0, "dist": 0.2}


SEED = RouterConfig(max_score_min=0.65)
"""The seed's initial thresholds."""


def row(text: str, signals: dict[str, float], dense: float, temporal: float, graph: float) -> dict:
    return {"text": text, "signals": signals, "scores": {"dense": dense, "temporal": temporal, "graph": graph}}


ROWS = [
    row("vitamin d", FLAT, 0.2, 0.2, 0.6),  # rule 3 pays off ...
    row("insulin", FLAT, 0.8, 0.8, 0.4),  # ... and hurts as much here
    row("sleep", PEAKED, 0.6, 0.6, 0.6),
    row("timeline of rail", PEAKED, 0.1, 0.7, 0.1),  # rule 1
]


def test_replay_applies_the_cascade() -> None:
    """Rule 1 on the text, rule 3 on the signals, Dense otherwise; the score of the chosen strategy counts."""
    out = replay_heuristic(ROWS, SEED)
    assert out["strategies"] == {"dense": 1, "temporal": 1, "graph": 2}
    assert out["ndcg_at_10"] == round((0.6 + 0.4 + 0.6 + 0.7) / 4, 4)


def test_grid_orders_by_score_then_fewer_graph_routes() -> None:
    """Never firing rule 3 and firing it for both flat probes score alike here; the cheaper one ranks first."""
    grid = threshold_grid(ROWS, SEED, skews=(0.5,), maxes=(0.65, 1.01))
    assert [g["max_score_min"] for g in grid] == [1.01, 0.65]
    assert grid[0]["strategies"]["graph"] == 0
    assert grid[0]["ndcg_at_10"] == grid[1]["ndcg_at_10"]


def test_near_ties_prefer_fewer_graph_routes() -> None:
    """A pair 0.0005 below the best but routing nothing to Graph ranks first; one 0.1 below does not."""
    rows = [
        row("a", FLAT, 0.5, 0.5, 0.502),  # Graph gains 0.002 on one query of 2: 0.001 on the mean
        row("b", PEAKED, 0.5, 0.5, 0.5),
    ]
    grid = threshold_grid(rows, SEED, skews=(0.5,), maxes=(0.65, 1.01), tolerance=0.002)
    assert [g["max_score_min"] for g in grid] == [1.01, 0.65]
    strict = threshold_grid(rows, SEED, skews=(0.5,), maxes=(0.65, 1.01), tolerance=0.0)
    assert [g["max_score_min"] for g in strict] == [0.65, 1.01]
