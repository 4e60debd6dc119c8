"""Per-tenant limits: the token bucket and the concurrency cap, driven by a fake clock (no sleeping)."""

from __future__ import annotations

import pytest

import fabric.serve.limits.tenants as mod
from fabric.serve.limits.tenants import LimitConfig, LimitExceeded, TenantLimits, TokenBucket


class Clock:
    """A settable monotonic clock."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class TestTokenBucket:
    def test_burst_then_refill_at_rate(self) -> None:
        """A full bucket grants ``burst`` at once, then one token per 1/rate seconds."""
        clock = Clock()
        bucket = TokenBucket(rate=8.0, burst=3, clock=clock)  # binary-exact steps of 1/16 s
        assert [bucket.take() for _ in range(3)] == [0.0, 0.0, 0.0]
        assert bucket.take() == 0.125
        clock.now += 0.0625
        assert bucket.take() == 0.0625
        clock.now += 0.0625
        assert bucket.take() == 0.0

    def test_never_exceeds_burst(self) -> None:
        """A long idle period refills to ``burst``, not beyond."""
        clock = Clock()
        bucket = TokenBucket(rate=100.0, burst=2, clock=clock)
        clock.now += 3600
        assert [bucket.take() == 0.0 for _ in range(3)] == [True, True, False]

    def test_granted_share_over_time(self) -> None:
        """Offered 2x the rate for 10 s (steps of 5 ms), about half is granted: rate*10 + burst."""
        clock = Clock()
        bucket = TokenBucket(rate=100.0, burst=20, clock=clock)
        granted = 0
        for _ in range(2000):
            granted += bucket.take() == 0.0
            clock.now += 0.005
        assert granted == pytest.approx(100 * 10 + 20, abs=2)


class TestTenantLimits:
    def test_tenants_have_separate_buckets(self) -> None:
        """One tenant's exhaustion does not touch another's bucket."""
        limits = TenantLimits(LimitConfig(rate=1.0, burst=2, concurrency=10), clock=Clock())
        for _ in range(2):
            limits.acquire("a")
            limits.release("a")
        with pytest.raises(LimitExceeded) as err:
            limits.acquire("a")
        assert (err.value.reason, err.value.retry_after_header) == ("rate", "1")
        limits.acquire("b")

    def test_concurrency_cap(self) -> None:
        """At most ``concurrency`` in flight per tenant; a release admits the next."""
        limits = TenantLimits(LimitConfig(rate=1000.0, burst=1000, concurrency=2), clock=Clock())
        limits.acquire("a")
        limits.acquire("a")
        with pytest.raises(LimitExceeded, match="concurrency"):
            limits.acquire("a")
        limits.acquire("b")
        limits.release("a")
        limits.acquire("a")
        assert (limits.inflight("a"), limits.inflight("b")) == (2, 1)

    def test_retry_after_rounds_up(self) -> None:
        """Retry-After is whole seconds, at least 1."""
        assert LimitExceeded("rate", 0.01).retry_after_header == "1"
        assert LimitExceeded("rate", 2.2).retry_after_header == "3"

    @pytest.mark.parametrize("kwargs", [{"rate": 0}, {"rate": float("inf")}, {"burst": 0}, {"concurrency": 0}])
    def test_invalid_config(self, kwargs: dict[str, float]) -> None:
        """Non-positive or infinite limits are refused naming the field."""
        with pytest.raises(ValueError, match=next(iter(kwargs))):
            LimitConfig(**kwargs)  # type: ignore[arg-type]

    def test_seed_defaults(self) -> None:
        """Seed 001: 100 requests per second per tenant."""
        assert LimitConfig().rate == 100.0


def test_public_api() -> None:
    """The module exports the limits, the bucket and the metrics."""
    assert set(mod.__all__) == {
        "Buckets",
        "LimitConfig",
        "LimitExceeded",
        "TenantLimits",
        "TenantMetrics",
        "TokenBucket",
    }
