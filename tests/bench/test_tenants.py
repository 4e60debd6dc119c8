"""``fabric bench tenants`` smoke test: a tiny run over HTTP with real keys and the per-tenant limits."""

from __future__ import annotations

import argparse

import pytest

from bench import tenants
from fabric.core.errors import QueryError


def test_heavy_tenant_is_limited_and_every_request_answered() -> None:
    """Offered 2x its limit with a burst far below the load, the heavy tenant gets 429s; every request of both
    tenants is answered 200 or 429 (never an error)."""
    figures = tenants.run(
        argparse.Namespace(rate=20.0, burst=2, seconds=1.0, over=2.0, under=0.25, replicas=1, state_url="")
    )
    assert figures["heavy_sent"] == 40
    assert figures["heavy_status"].get(429, 0) > 0
    assert sum(figures["heavy_status"].values()) == 40
    assert set(figures["heavy_status"]) <= {200, 429}
    assert sum(figures["light_status"].values()) == figures["light_sent"] == 5
    assert {"light_p50_ms", "light_p95_ms", "heavy_429_ratio_ideal"} <= set(figures)


def test_bad_arguments_are_a_query_error() -> None:
    """A non-positive rate is refused naming the options."""
    with pytest.raises(QueryError, match="--rate"):
        tenants.run(argparse.Namespace(rate=0.0, burst=2, seconds=1.0, over=2.0, under=0.5, replicas=1, state_url=""))
    with pytest.raises(QueryError, match="--state-url"):
        tenants.run(argparse.Namespace(rate=5.0, burst=2, seconds=1.0, over=2.0, under=0.5, replicas=2, state_url=""))


def test_two_replicas_share_the_heavy_tenants_limit(state_url: str) -> None:
    """Two replicas on one PostgreSQL database: the heavy tenant's requests, spread over both, are admitted at
    most at its one limit (burst + rate x seconds), not twice it."""
    args = argparse.Namespace(rate=10.0, burst=2, seconds=1.0, over=3.0, under=0.2, replicas=2, state_url=state_url)
    figures = tenants.run(args)
    assert (figures["replicas"], figures["shared_state"], figures["heavy_sent"]) == (2, True, 30)
    assert set(figures["heavy_status"]) <= {200, 429}
    assert figures["heavy_status"].get(200, 0) <= 10 * 1.0 + 2 + 1
    assert figures["heavy_admitted_per_s"] <= figures["heavy_admitted_per_s_ideal"] + 1
