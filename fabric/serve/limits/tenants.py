"""Per-tenant request limits of the service: a token bucket and a concurrency cap, with their metrics.

Each tenant has its own bucket of ``burst`` tokens refilled at ``rate`` tokens per second (the API contract: 100
requests
per second per tenant; the default burst of 200 absorbs two seconds' worth of jitter) and at most ``concurrency``
requests in flight. A request over either limit is refused at once (never queued) with the number of seconds
after which a retry can succeed (``Retry-After``). The buckets live in process memory, or, for replicas behind
one address, in their shared database (:class:`fabric.serve.state.shared.SharedBuckets`, ``FABRIC_STATE_URL``): then a
tenant gets ``rate`` requests per second in total however its traffic is spread. The concurrency cap is per
replica (it bounds what one process holds in flight).

Metrics (in the engine's registry): ``fabric_tenant_requests_total{tenant, route, code}``,
``fabric_tenant_rejections_total{tenant, reason}`` (``reason``: ``rate``, ``concurrency``, ``unauthenticated``,
``forbidden``) and ``fabric_tenant_inflight{tenant}``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["Buckets", "LimitConfig", "LimitExceeded", "TenantLimits", "TenantMetrics", "TokenBucket"]


@dataclass(frozen=True, slots=True)
class LimitConfig:
    """Per-tenant limits (every tenant gets the same)."""

    rate: float = 100.0
    """Sustained requests per second."""
    burst: int = 200
    """Bucket size: requests accepted at once after an idle period."""
    concurrency: int = 32
    """Requests in flight at once."""

    def __post_init__(self) -> None:
        if not (self.rate > 0 and math.isfinite(self.rate)):
            raise ValueError(f"rate: expected a positive number of requests per second, got {self.rate}")
        if self.burst < 1:
            raise ValueError(f"burst: expected at least 1, got {self.burst}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency: expected at least 1, got {self.concurrency}")


class LimitExceeded(Exception):
    """A request over a tenant's limit: ``reason`` is ``rate`` or ``concurrency``."""

    def __init__(self, reason: str, retry_after: float) -> None:
        super().__init__(f"{reason} limit exceeded; retry after {retry_after:.3f} s")
        self.reason = reason
        self.retry_after = retry_after

    @property
    def retry_after_header(self) -> str:
        """Whole seconds for the ``Retry-After`` header (at least 1)."""
        return str(max(1, math.ceil(self.retry_after)))


@dataclass(slots=True)
class TokenBucket:
    """A token bucket; ``clock`` is injectable so tests drive time instead of sleeping."""

    rate: float
    burst: int
    clock: Callable[[], float] = time.monotonic
    tokens: float = field(init=False)
    stamp: float = field(init=False)

    def __post_init__(self) -> None:
        self.tokens = float(self.burst)
        self.stamp = self.clock()

    def take(self) -> float:
        """Take one token: 0.0 when granted, else the seconds until one is available (nothing is taken)."""
        now = self.clock()
        self.tokens = min(float(self.burst), self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class Buckets(Protocol):
    """Token buckets kept outside the process (:class:`fabric.serve.state.shared.SharedBuckets`)."""

    def take(self, name: str, rate: float, burst: int) -> Awaitable[float]:
        """Take one token: 0.0 when granted, else the seconds until one is available."""
        ...


class TenantMetrics:
    """The per-tenant request and rejection counters, registered in ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "fabric_tenant_requests", "Requests answered, per tenant", ["tenant", "route", "code"], registry=registry
        )
        self.rejections = Counter(
            "fabric_tenant_rejections", "Requests refused by a guard, per tenant", ["tenant", "reason"],
            registry=registry,
        )  # fmt: skip
        self.inflight = Gauge("fabric_tenant_inflight", "Requests in flight, per tenant", ["tenant"], registry=registry)


class TenantLimits:
    """Token buckets and in-flight counts by tenant name."""

    def __init__(
        self, config: LimitConfig, *, clock: Callable[[], float] = time.monotonic, shared: Buckets | None = None
    ) -> None:
        self.config = config
        self.shared = shared
        """Buckets shared by the replicas (None: this process's own)."""
        self._clock = clock
        self._buckets: dict[str, TokenBucket] = {}
        self._inflight: dict[str, int] = {}

    def acquire(self, tenant: str) -> None:
        """Admit one request of ``tenant`` (pair with :meth:`release`).

        Raises:
            LimitExceeded: the tenant is over its concurrency cap or out of tokens.
        """
        if self._inflight.get(tenant, 0) >= self.config.concurrency:
            raise LimitExceeded("concurrency", 1.0)
        bucket = self._buckets.get(tenant)
        if bucket is None:
            bucket = self._buckets[tenant] = TokenBucket(self.config.rate, self.config.burst, self._clock)
        wait = bucket.take()
        if wait > 0.0:
            raise LimitExceeded("rate", wait)
        self._inflight[tenant] = self._inflight.get(tenant, 0) + 1

    async def admit(self, tenant: str) -> None:
        """:meth:`acquire`, taking the token from the shared buckets when there are (pair with :meth:`release`).

        Raises:
            LimitExceeded: the tenant is over its concurrency cap (in this replica) or out of tokens.
        """
        if self.shared is None:
            self.acquire(tenant)
            return
        if self._inflight.get(tenant, 0) >= self.config.concurrency:
            raise LimitExceeded("concurrency", 1.0)
        self._inflight[tenant] = self._inflight.get(tenant, 0) + 1  # held across the await: the cap stays exact
        try:
            wait = await self.shared.take(f"tenant:{tenant}", self.config.rate, self.config.burst)
        except BaseException:
            self.release(tenant)
            raise
        if wait > 0.0:
            self.release(tenant)
            raise LimitExceeded("rate", wait)

    def release(self, tenant: str) -> None:
        """One request of ``tenant`` finished."""
        left = self._inflight.get(tenant, 0) - 1
        if left > 0:
            self._inflight[tenant] = left
        else:
            self._inflight.pop(tenant, None)

    def inflight(self, tenant: str) -> int:
        """Requests of ``tenant`` in flight."""
        return self._inflight.get(tenant, 0)
