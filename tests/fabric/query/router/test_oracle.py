"""Tests for the oracle labels of seed 004 §5."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fabric.core.strategies import Strategy
from fabric.query.router.oracle import ABLATION_DELTAS, ablation, select_gold_label

D, T, G = Strategy.DENSE, Strategy.TEMPORAL, Strategy.GRAPH


def seed_reference(results: dict[str, float], delta: float, eps: float = 1e-6) -> str:
    """Seed 004 §5 as written there (names Dense/Temporal/Graph), the reference the implementation must equal."""
    s_dense = results["Dense"]
    s_temp = results["Temporal"]
    s_graph = results["Graph"]
    best_score = max(s_dense, s_temp, s_graph)
    tied = []
    if abs(s_dense - best_score) <= eps:
        tied.append("Dense")
    if abs(s_temp - best_score) <= eps:
        tied.append("Temporal")
    if abs(s_graph - best_score) <= eps:
        tied.append("Graph")
    best = next(name for name in ["Dense", "Temporal", "Graph"] if name in tied)
    if best == "Dense":
        return "Dense"
    if best == "Temporal":
        return "Temporal" if (s_temp >= s_dense + delta) else "Dense"
    if (s_graph >= s_dense + delta) and (s_graph >= s_temp + delta):
        return "Graph"
    if s_dense >= s_graph - delta:
        return "Dense"
    if s_temp >= s_graph - delta:
        return "Temporal"
    return "Graph"


NAMES = {"Dense": D, "Temporal": T, "Graph": G}
unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
grid = st.sampled_from([0.0, 0.1, 0.5, 0.52, 0.55, 0.6, 0.8, 1.0])


@given(unit | grid, unit | grid, unit | grid, st.sampled_from(ABLATION_DELTAS))
def test_equals_the_seed_algorithm(d: float, t: float, g: float, delta: float) -> None:
    """Same label as the seed's code for any scores and every ablated δ (ties on a grid included)."""
    ref = seed_reference({"Dense": d, "Temporal": t, "Graph": g}, delta)
    assert select_gold_label({D: d, T: t, G: g}, delta=delta) is NAMES[ref]


def test_seed_example_graph_not_worth_it() -> None:
    """Dense 0.80 vs Graph 0.83: within δ = 0.05, so Dense."""
    assert select_gold_label({D: 0.80, T: 0.0, G: 0.83}) is D
    assert select_gold_label({D: 0.80, T: 0.0, G: 0.86}) is G


def test_ties_break_toward_simpler() -> None:
    """Exact (within ε) ties: Dense > Temporal > Graph."""
    assert select_gold_label({D: 0.5, T: 0.5, G: 0.5}) is D
    assert select_gold_label({D: 0.1, T: 0.5, G: 0.5 + 1e-7}, delta=0.0) is T


def test_graph_close_to_temporal_falls_back_to_temporal() -> None:
    """Graph best but within δ of Temporal (and far above Dense): the simplest within δ, Temporal."""
    assert select_gold_label({D: 0.2, T: 0.62, G: 0.65}) is T


def test_string_keys_work() -> None:
    """Strategy is a str enum: label files keyed by "dense" work as they are."""
    assert select_gold_label({"dense": 0.1, "temporal": 0.9, "graph": 0.2}) is T


def test_ablation_counts_every_delta() -> None:
    """Larger δ moves labels toward Dense."""
    rows = [{D: 0.5, T: 0.53, G: 0.0}, {D: 0.5, T: 0.0, G: 0.62}, {D: 0.5, T: 0.5, G: 0.5}]
    out = ablation(rows)
    assert list(out) == ["0.00", "0.02", "0.05", "0.10"]
    assert out["0.00"] == {"dense": 1, "temporal": 1, "graph": 1}
    assert out["0.05"] == {"dense": 2, "temporal": 0, "graph": 1}
    assert out["0.10"] == {"dense": 2, "temporal": 0, "graph": 1}
    assert out["0.02"] == {"dense": 1, "temporal": 1, "graph": 1}
