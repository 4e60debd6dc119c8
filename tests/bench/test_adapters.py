"""``fabric bench adapters`` smoke test: tiny run, every figure present (numbers come from real runs, not tests)."""

from __future__ import annotations

import argparse

from bench import adapters


def test_figures_present() -> None:
    """A tiny run reports overhead for every adapter and the hung-server section."""
    args = argparse.Namespace(iterations=2, budget_ms=250.0, hung_queries=4)
    figures = adapters.run(args)
    assert set(figures["overhead"]) == {"searxng", "wikipedia", "mdn", "meilisearch", "arango", "rss", "quotes"}
    hung = figures["hung_server"]
    assert (hung["warm_web_status"], hung["keyword_success_all"]) == ("success", True)
    assert sum(hung["web_statuses"].values()) == 4
    each = figures["hung_each"]
    assert set(each) == set(figures["overhead"])
    assert all(v["keyword_success_all"] and "success" not in v["statuses"] for v in each.values())
    assert (hung["searxng_health"]["reason"], hung["searxng_health"]["failure_rate"] > 0) == ("timeout", True)
