"""``fabric bench budget`` smoke test: a tiny run reports every figure and keeps the healthy lanes' hits."""

from __future__ import annotations

import argparse

import pytest

from bench import budget
from fabric.core.errors import QueryError


def test_tiny_run_reports_every_figure() -> None:
    """Every query is counted, healthy hits are kept, the hung and suspended lanes show up in the statuses."""
    args = argparse.Namespace(queries=24, budget_ms=100.0, concurrency=4, seed=7, overhead_queries=4)
    figures = budget.run(args)
    assert figures["queries"] == 24
    assert figures["healthy_hits_share"] > 0.5
    assert figures["overhead_p50_ms"] is not None
    assert figures["lane_statuses"]["alpha:success"] == 28  # 24 concurrent + 4 one at a time
    assert {"p50_ms", "p99_ms", "overhead_p50_ms", "gc_pause_max_ms", "abandoned_total"} <= set(figures)


def test_bad_options_are_a_query_error() -> None:
    """Zero queries is refused with a clear error, not a crash."""
    args = argparse.Namespace(queries=0, budget_ms=100.0, concurrency=4, seed=7, overhead_queries=4)
    with pytest.raises(QueryError, match="must be positive"):
        budget.run(args)
