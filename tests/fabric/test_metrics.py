"""Tests for per-engine Prometheus metrics."""

from __future__ import annotations

from fabric.metrics import EngineMetrics
from fabric.models import LaneKind, LaneOutcome, LaneStatus


def outcome(name: str, status: LaneStatus) -> LaneOutcome:
    return LaneOutcome(lane=name, kind=LaneKind.KEYWORD, provider="p", status=status, latency_ms=5.0)


class TestMetrics:
    def test_registries_are_per_engine(self) -> None:
        """Two engines do not share counters (no global registry)."""
        a, b = EngineMetrics(), EngineMetrics()
        a.observe_lanes({"k": outcome("k", LaneStatus.SUCCESS)})
        assert a.summary()["lane_success_rate"] == 1.0
        assert b.summary()["lane_success_rate"] is None

    def test_monitoring_table_computable(self) -> None:
        """Lane success rate, dedup rate and response time come out of the counters."""
        m = EngineMetrics()
        m.observe_lanes({"k": outcome("k", LaneStatus.SUCCESS), "v": outcome("v", LaneStatus.TIMEOUT)})
        m.observe_query(total_ms=40.0, partial=True, candidates=10, removed=3)
        s = m.summary()
        assert s["lane_success_rate"] == 0.5
        assert s["dedup_rate"] == 0.3
        assert s["response_time_mean_ms"] == 40.0
        assert s["partial_share"] == 1.0

    def test_exposition_names(self) -> None:
        """The text exposition names the lane and suspension metrics."""
        m = EngineMetrics()
        m.observe_lanes({"k": outcome("k", LaneStatus.ERROR)})
        m.set_provider("p", suspended=True, health={"penalty": 0.5, "failure_rate": 0.5})
        text = m.exposition().decode()
        assert 'fabric_lane_outcomes_total{lane="k",status="error"} 1.0' in text
        assert 'fabric_provider_suspended{provider="p"} 1.0' in text
        assert 'fabric_provider_penalty{provider="p"} 0.5' in text

    def test_provider_gauges_follow_every_change(self) -> None:
        """Gauges written only on change still show the latest state of each provider."""
        m = EngineMetrics()
        m.set_provider("p", suspended=True, health={"penalty": 0.5, "failure_rate": 0.5})
        m.set_provider("p", suspended=True, health={"penalty": 0.5, "failure_rate": 0.5})
        m.set_provider("p", suspended=False, health={"penalty": 0.5, "failure_rate": 0.25})
        m.set_provider("q", suspended=False, health={"penalty": 1.0, "failure_rate": 0.0})
        text = m.exposition().decode()
        assert 'fabric_provider_suspended{provider="p"} 0.0' in text
        assert 'fabric_provider_penalty{provider="p"} 0.5' in text
        assert 'fabric_provider_failure_rate{provider="p"} 0.25' in text
        assert 'fabric_provider_suspended{provider="q"} 0.0' in text
        assert 'fabric_provider_penalty{provider="q"} 1.0' in text
