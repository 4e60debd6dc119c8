"""Tests for strategies, routes and the route record."""

from __future__ import annotations

from fabric.core.strategies import ROUTES, STRATEGY_ORDER, RouteRecord, Strategy


def test_routes_and_simplicity_order() -> None:
    """auto, all and the three strategies; Dense < Temporal < Graph."""
    assert ROUTES == ("auto", "all", "dense", "temporal", "graph")
    assert STRATEGY_ORDER == (Strategy.DENSE, Strategy.TEMPORAL, Strategy.GRAPH)


def test_record_json() -> None:
    """The result's route section: route, strategy, chooser, rule, reason, lanes, signals, probabilities."""
    rec = RouteRecord(
        route="auto",
        strategy="graph",
        chooser="heuristic",
        rule="probe_flat",
        reason="flat",
        lanes=("vector", "graph"),
        lane_calls=2,
        signals={"max": 0.81234567, "min": 0.1, "mean": 0.3, "skew": 0.2, "dist": 0.4},
        year_filter=(2019, 2021),
        extra={"probe_reused": True},
    )
    body = rec.to_dict()
    assert body["signals"]["max"] == 0.812346
    assert body["year_filter"] == [2019, 2021]
    assert body["probabilities"] is None
    assert body["probe_reused"] is True
    assert body["lanes"] == ["vector", "graph"]


def test_federation_record() -> None:
    """route=all: every planned lane, chosen by the request."""
    body = RouteRecord.federation(["keyword", "vector"]).to_dict()
    assert (body["route"], body["strategy"], body["chooser"], body["lane_calls"]) == ("all", "all", "request", 2)
    assert body["signals"] is None
