"""Tests for per-engine Prometheus metrics."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fabric.core.models import Hit, LaneKind, LaneOutcome, LaneStatus
from fabric.query.metrics import EngineMetrics


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

    def test_a_lane_skipped_by_design_is_no_failure(self) -> None:
        """Staged fill lanes skipped because the first stage sufficed stay out of the success rate."""
        m = EngineMetrics()
        for _ in range(3):
            m.observe_lanes({"k": outcome("k", LaneStatus.SUCCESS), "fill": outcome("fill", LaneStatus.SKIPPED)})
        assert m.summary()["lane_success_rate"] == 1.0

    def test_process_and_build_series(self) -> None:
        """Every engine registry exports the process's, the interpreter's and the build's series."""
        from prometheus_client import generate_latest

        from fabric import __version__

        text = generate_latest(EngineMetrics().registry).decode()
        assert "process_cpu_seconds_total" in text
        assert "python_gc_objects_collected_total" in text
        assert f'fabric_build_info{{revision="unknown",version="{__version__}"}} 1.0' in text

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


def _hits(*ids: str) -> tuple[Hit, ...]:
    return tuple(Hit(id=i, rank=n, score=1.0 / n) for n, i in enumerate(ids, start=1))


class TestQualityProxies:
    def test_lane_agreement_is_mean_pairwise_top10_overlap(self) -> None:
        """Three lanes: overlaps 2/2, 1/2 and 1/2 → mean 2/3; lanes without hits do not count."""
        m = EngineMetrics()
        base = outcome("k", LaneStatus.SUCCESS)
        m.observe_lanes({
            "k": replace(base, hits=_hits("a", "b")),
            "v": replace(base, lane="v", hits=_hits("b", "a", "c")),
            "g": replace(base, lane="g", hits=_hits("a", "x")),
            "w": replace(base, lane="w"),
        })  # fmt: skip
        assert m.summary()["lane_agreement_mean"] == round(2 / 3, 4)

    def test_only_the_top_10_counts(self) -> None:
        """Ids past rank 10 do not add agreement."""
        m = EngineMetrics()
        base = outcome("k", LaneStatus.SUCCESS)
        ids = [f"d{i}" for i in range(20)]
        m.observe_lanes({"k": replace(base, hits=_hits(*ids)), "v": replace(base, lane="v", hits=_hits(*ids[10:]))})
        assert m.summary()["lane_agreement_mean"] == 0.0

    def test_empty_answer_rate(self) -> None:
        """A query where no lane returned a hit is an empty answer."""
        m = EngineMetrics()
        base = outcome("k", LaneStatus.SUCCESS)
        m.observe_lanes({"k": base})
        m.observe_query(total_ms=1.0, partial=False, candidates=0, removed=0)
        m.observe_lanes({"k": replace(base, hits=_hits("a"))})
        m.observe_query(total_ms=1.0, partial=False, candidates=1, removed=0)
        assert m.summary()["empty_answer_rate"] == 0.5

    def test_citation_counts(self) -> None:
        """Supported and unsupported sentences are exported; impossible counts are refused."""
        m = EngineMetrics()
        m.observe_citations(supported=3, total=4)
        text = m.exposition().decode()
        assert 'fabric_citation_sentences_total{supported="true"} 3.0' in text
        assert 'fabric_citation_sentences_total{supported="false"} 1.0' in text
        with pytest.raises(ValueError, match="supported"):
            m.observe_citations(supported=5, total=4)


def _hits(*ids: str) -> tuple[Hit, ...]:
    return tuple(Hit(id=i, rank=n, score=1.0, title="", text="", url="", domain="") for n, i in enumerate(ids, 1))


class TestTenantProxies:
    def test_lane_agreement(self) -> None:
        """Mean pairwise top-10 overlap over lanes with hits; None under two such lanes."""
        from fabric.query.metrics import lane_agreement

        a = replace(outcome("a", LaneStatus.SUCCESS), hits=_hits("x", "y"))
        b = replace(outcome("b", LaneStatus.SUCCESS), hits=_hits("y", "z", "w"))
        empty = outcome("c", LaneStatus.SUCCESS)
        assert lane_agreement({"a": a, "b": b, "c": empty}) == pytest.approx(0.5)
        assert lane_agreement({"a": a, "c": empty}) is None

    def test_top_score_mass(self) -> None:
        """The first 3 items' share of the top-10 score mass; None without positive mass."""
        from fabric.query.metrics import top_score_mass

        assert top_score_mass([1.0, 1.0, 1.0, 1.0]) == pytest.approx(0.75)
        assert top_score_mass([0.9] + [0.0] * 9) == pytest.approx(1.0)
        assert top_score_mass([1.0] * 20) == pytest.approx(0.3)
        assert top_score_mass([]) is None
        assert top_score_mass([0.0, 0.0]) is None

    def test_mutations_and_conflicts_per_tenant(self) -> None:
        """observe_mutation counts the outcome and each conflict kind met, per tenant."""
        m = EngineMetrics()
        m.observe_mutation("acme", "ingest", "conflict", {"id_collision": 3, "concurrent_update": 0})
        m.observe_mutation("acme", "delete", "success")
        labels = {"tenant": "acme", "op": "ingest", "outcome": "conflict"}
        assert m.registry.get_sample_value("fabric_mutations_total", labels) == 1.0
        conflicts = {"tenant": "acme", "kind": "id_collision"}
        assert m.registry.get_sample_value("fabric_conflicts_total", conflicts) == 3.0
        assert (
            m.registry.get_sample_value("fabric_conflicts_total", {"tenant": "acme", "kind": "concurrent_update"})
            is None
        )

    def test_citations_per_tenant(self) -> None:
        """Citation sentences go to the global series and, with a tenant, to the tenant's."""
        m = EngineMetrics()
        m.observe_citations(supported=2, total=3, tenant="acme")
        assert m.registry.get_sample_value("fabric_citation_sentences_total", {"supported": "false"}) == 1.0
        labels = {"tenant": "acme", "supported": "true"}
        assert m.registry.get_sample_value("fabric_tenant_citation_sentences_total", labels) == 2.0
