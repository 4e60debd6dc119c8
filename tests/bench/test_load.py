"""``fabric bench load`` smoke test: a tiny run against the in-process service answers every request."""

from __future__ import annotations

import argparse

from bench import load


def test_all_requests_answered() -> None:
    """Every request of a tiny run answers 200 and the latency figures are reported."""
    figures = load.run(argparse.Namespace(requests=20, concurrency=4, lane_delay_ms=1.0, budget_ms=1000.0))
    assert (figures["non_200"], figures["requests"]) == (0, 20)
    assert {"p50_ms", "p99_ms", "rps"} <= set(figures)
