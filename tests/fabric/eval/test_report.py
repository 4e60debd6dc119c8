"""Tests of the eval report's stage counters (seed 000: queries per stage-2 outcome)."""

from __future__ import annotations

from fabric.eval.report import entity_match, stage_counters
from fabric.eval.runner import PassResult, QueryRun


def _run(qid: str, outcome: str | None, **stages: object) -> QueryRun:
    record = {"stage2_outcome": outcome, **stages} if outcome is not None else dict(stages)
    return QueryRun(query_id=qid, doc_ids=(), latency_ms=1.0, stages=record)


class TestStageCounters:
    def test_counts_queries_per_outcome(self) -> None:
        """Each query counts once under its outcome; gate values are not summed; appended items add up."""
        runs = [
            _run("q1", "used", stage2_used=True, stage1_ms=10.0, stage2_ms=30.0, stage2_appended=4, min_must_count=3),
            _run("q2", "used", stage2_used=True, stage1_ms=20.0, stage2_ms=50.0, stage2_appended=2, min_must_count=3),
            _run("q3", "skipped_budget", stage1_ms=30.0, min_must_count=3),
            _run("q4", "skipped", stage1_ms=40.0, min_must_count=3),
            _run("q5", "not_triggered", stage1_ms=50.0, min_must_count=3),
            _run("q6", None, stage1_ms=60.0),  # a record without an outcome: no stage-2 lanes
        ]
        out = stage_counters(PassResult(name="fused", lanes=("a",), runs={r.query_id: r for r in runs}))
        assert out == {
            "queries": 6,
            "stage2_used": 2,
            "stage2_skipped": 2,
            "stage2_skipped_budget": 1,
            "not_triggered": 1,
            "no_stage2_lanes": 1,
            "stage2_appended": 6,
            "stage1_ms_p50": 35.0,
            "stage1_ms_p95": 57.5,
            "stage2_ms_p50": 40.0,
            "stage2_ms_p95": 49.0,
        }


class TestEntityMatch:
    def test_share_of_queries_with_a_match(self) -> None:
        """Seed 004: the share of the queries a graph lane answered that matched >= 1 entity."""
        runs = [
            QueryRun(query_id="q1", doc_ids=(), latency_ms=1.0, entity_matches=2),
            QueryRun(query_id="q2", doc_ids=(), latency_ms=1.0, entity_matches=0),
            QueryRun(query_id="q3", doc_ids=(), latency_ms=1.0, entity_matches=1),
            QueryRun(query_id="q4", doc_ids=(), latency_ms=1.0, entity_matches=0),
            QueryRun(query_id="q5", doc_ids=(), latency_ms=1.0),  # no graph lane answered
        ]
        out = entity_match(PassResult(name="fused", lanes=("graph",), runs={r.query_id: r for r in runs}))
        assert out == {"queries": 4, "with_match": 2, "entity_match_rate": 0.5}

    def test_none_without_a_graph_lane(self) -> None:
        runs = {"q1": QueryRun(query_id="q1", doc_ids=(), latency_ms=1.0)}
        assert entity_match(PassResult(name="fused", lanes=("keyword",), runs=runs)) is None
