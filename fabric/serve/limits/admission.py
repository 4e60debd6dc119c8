"""Admission control of the search route: a bounded number of queries run, a bounded queue waits, the rest is shed.

Without it every request that arrives starts at once: under a burst hundreds of queries share two cores and a
worker pool, each lane waits its turn for a thread, the lanes time out, and those timeouts used to open the
local stores' circuit breakers (measured: 95.6 % empty answers after a 200-client burst). With it:

- at most ``max_active`` queries run at once (:meth:`AdmissionControl.slot`); the budget of a query starts when
  it is admitted (:meth:`fabric.query.engine.Engine.plan` takes its deadline then), so an admitted query keeps its
  whole budget however long it queued;
- up to ``max_queue`` more wait, first come first served, at most ``max_wait_ms`` each;
- beyond that a request is refused at once with :class:`Overloaded`, which the service answers ``503`` with
  ``Retry-After`` (:func:`overloaded_response`); a queued request whose wait runs out is refused the same way;
- while queued requests are timing out (one did within :data:`SHED_WINDOW_S`), a request that would have to
  queue is refused at once when its expected wait is longer than ``max_wait_ms`` (``expected_wait``): its place
  in the queue times the recent interval between slots freeing up while every slot was busy
  (:meth:`AdmissionControl.expected_wait_s`). Under sustained overload a third of the refusals used to be
  ``queue_timeout``, each after waiting the whole ``max_wait_ms``; now most are told on arrival. Only once
  requests time out: the estimate is least sure at the edge of capacity, and a service that is keeping up (no
  timeouts) gives every request that fits in the queue its chance, as before.

Because nothing is queued for longer than ``max_wait_ms``, the service is back to normal that long after a
burst ends. The defaults come from the cores this process may use (:func:`default_config`).

With ``hand_back`` (``fabric serve --workers``: the workers accept from one listening socket) a busy worker gives
its keep-alive connections back: a refusal, and an answer sent while requests wait in its queue, carry
``Connection: close`` (:meth:`AdmissionControl.hand_back`). A keep-alive connection otherwise stays with the worker
that accepted it, and a client that reuses a few connections can keep one worker saturated while the other idles
(``docs/replicas.md``); the client's next connection goes to the worker that calls ``accept`` first, the idle one.

Metrics (in the engine's registry): ``fabric_admission_admitted_total``, ``fabric_admission_rejected_total{reason}``
(``queue_full``, ``expected_wait``, ``queue_timeout``), ``fabric_admission_queue_wait_seconds`` (admitted requests),
``fabric_admission_active``, ``fabric_admission_queued``, ``fabric_admission_capacity{limit}`` and
``fabric_admission_connections_handed_back_total``.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = [
    "ACTIVE_PER_CORE",
    "ADMISSION_KEY",
    "CURRENT_ADMISSION",
    "PACE_MAX_AGE_S",
    "PACE_WINDOW",
    "SHED_WINDOW_S",
    "WORKER_ACTIVE_PER_CORE",
    "AdmissionConfig",
    "AdmissionControl",
    "Overloaded",
    "default_config",
    "overloaded_response",
    "usable_cores",
]

_WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

PACE_WINDOW = 32
"""Releases of a busy service the pace of freed slots is measured over (the last ones)."""
PACE_MIN = 8
"""Fewest such releases before the pace is trusted."""
PACE_MAX_AGE_S = 2.0
"""A pace whose last release is older than this is stale: the service has not been busy since."""
SHED_WINDOW_S = 1.0
"""Refusals on the expected wait happen only this long after a queued request last timed out."""
ACTIVE_PER_CORE = 2
"""Default running queries per usable core of one process (``docs/servers.md``, "Why 2 per core")."""
WORKER_ACTIVE_PER_CORE = 3
"""Default running queries per core of its share for a ``fabric serve --workers`` child: 3 for 2 workers on 2 cores.
At 100 RPS on the 50K home each worker admits 50 searches a second that take 20-30 ms of wall time (its core is
shared with the other worker and the lane threads), 1.0-1.5 in flight on average: with 2 slots a worker's burst
queued past ``max_wait_ms`` in every run (9-318 of 6,000 refused, 4 runs); with 3, 7 of 13 runs refused none and
the others 5-146, most in slow phases of the machine (``docs/replicas.md``)."""


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity where the platform tells, else the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True, slots=True)
class AdmissionConfig:
    """Admission limits of the search route (``fabric serve --max-active/--max-queue/--max-wait-ms``).

    A value of 0 for ``max_active`` or ``max_queue`` means the default derived from the cores.
    """

    max_active: int = 0
    """Queries running at once; 0: 2 per usable core."""
    max_queue: int = 0
    """Queries waiting for a slot; 0: twice ``max_active``."""
    max_wait_ms: float = 100.0
    """Longest wait in the queue before the request is refused."""
    retry_after_s: int = 1
    """The ``Retry-After`` of a refusal, in whole seconds."""
    hand_back: bool = False
    """Close the connection of a refusal and of an answer sent while requests wait (:meth:`AdmissionControl.
    hand_back`): for processes that share one listening socket."""

    def __post_init__(self) -> None:
        if self.max_active < 0 or self.max_queue < 0:
            raise ValueError("max_active and max_queue must be >= 0 (0: derived from the cores)")
        if not (self.max_wait_ms >= 0 and math.isfinite(self.max_wait_ms)):
            raise ValueError(f"max_wait_ms: expected a finite number >= 0, got {self.max_wait_ms}")
        if self.retry_after_s < 1:
            raise ValueError(f"retry_after_s: expected at least 1, got {self.retry_after_s}")

    def resolved(self, cores: int | None = None, per_core: int = ACTIVE_PER_CORE) -> AdmissionConfig:
        """This config with the derived defaults filled in (``per_core`` running queries per core)."""
        active = self.max_active or per_core * (cores or usable_cores())
        queue = self.max_queue or 2 * active
        return AdmissionConfig(active, queue, self.max_wait_ms, self.retry_after_s, self.hand_back)


def default_config() -> AdmissionConfig:
    """The default limits for this machine (2 running queries per core, a queue twice that, 100 ms of wait)."""
    return AdmissionConfig().resolved()


class Overloaded(Exception):
    """A request refused by admission control: ``reason`` is ``queue_full``, ``expected_wait`` or ``queue_timeout``."""

    def __init__(self, reason: str, retry_after_s: int, active: int, queued: int) -> None:
        super().__init__(f"service overloaded ({reason}: {active} queries running, {queued} waiting); retry later")
        self.reason = reason
        self.retry_after_s = retry_after_s


class _Metrics:
    def __init__(self, registry: CollectorRegistry | None, config: AdmissionConfig) -> None:
        r = registry or CollectorRegistry()
        self.admitted = Counter("fabric_admission_admitted", "Search requests admitted", registry=r)
        self.rejected = Counter(
            "fabric_admission_rejected", "Search requests refused by admission control", ["reason"], registry=r
        )
        self.wait = Histogram(
            "fabric_admission_queue_wait_seconds", "Time admitted requests waited for a slot", buckets=_WAIT_BUCKETS,
            registry=r,
        )  # fmt: skip
        self.active = Gauge("fabric_admission_active", "Search requests running", registry=r)
        self.queued = Gauge("fabric_admission_queued", "Search requests waiting for a slot", registry=r)
        self.handed_back = Counter(
            "fabric_admission_connections_handed_back",
            "Responses that closed their keep-alive connection because this process was busy (hand_back)",
            registry=r,
        )
        capacity = Gauge("fabric_admission_capacity", "Admission limits", ["limit"], registry=r)
        capacity.labels("max_active").set(config.max_active)
        capacity.labels("max_queue").set(config.max_queue)


class AdmissionControl:
    """Slots for running queries and a bounded first-come-first-served queue for them (one event loop).

    Args:
        config: the limits (defaults resolved from the cores when 0).
        registry: Prometheus registry for the metrics (the engine's).
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        config: AdmissionConfig | None = None,
        registry: CollectorRegistry | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = (config or AdmissionConfig()).resolved()
        self.metrics = _Metrics(registry, self.config)
        self.active = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._clock = clock
        self._busy_releases: deque[float] = deque(maxlen=PACE_WINDOW)
        """When slots freed up while every slot was busy (the service's pace when it is the bottleneck)."""
        self._timed_out_at = -math.inf
        """When a queued request last ran out of wait."""

    @property
    def queued(self) -> int:
        """Requests waiting for a slot."""
        return len(self._waiters)

    def expected_wait_s(self, position: int) -> float | None:
        """Seconds until ``position`` more slots free up, at the recent pace of a busy service; None when there is
        no recent pace (fewer than :data:`PACE_MIN` busy releases, or none for :data:`PACE_MAX_AGE_S`)."""
        times = self._busy_releases
        if len(times) < PACE_MIN or self._clock() - times[-1] > PACE_MAX_AGE_S:
            return None
        return position * (times[-1] - times[0]) / (len(times) - 1)

    def _refuse(self, reason: str) -> Overloaded:
        self.metrics.rejected.labels(reason).inc()
        return Overloaded(reason, self.config.retry_after_s, self.active, self.queued)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one running slot for the body of the ``async with``.

        Raises:
            Overloaded: the queue is full, or no slot freed up within ``max_wait_ms``.
        """
        await self._acquire()
        try:
            yield
        finally:
            self._release()

    async def _acquire(self) -> None:
        cfg = self.config
        if self.active < cfg.max_active and not self._waiters:
            self._admitted(0.0)
            return
        if len(self._waiters) >= cfg.max_queue:
            raise self._refuse("queue_full")
        if self._clock() - self._timed_out_at <= SHED_WINDOW_S:
            expected = self.expected_wait_s(len(self._waiters) + 1)
            if expected is not None and expected * 1000.0 > cfg.max_wait_ms:
                raise self._refuse("expected_wait")
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self.metrics.queued.set(len(self._waiters))
        t0 = time.monotonic()
        try:
            async with asyncio.timeout(cfg.max_wait_ms / 1000.0):
                await asyncio.shield(waiter)
        except TimeoutError:
            if not self._abandon(waiter):  # the slot was handed over just as the wait ran out: keep it
                self._admitted(time.monotonic() - t0, handed=True)
                return
            self._timed_out_at = self._clock()
            raise self._refuse("queue_timeout") from None
        except asyncio.CancelledError:  # the client went away while queued
            if not self._abandon(waiter):
                self._release()  # a slot was handed to us: pass it on
            raise
        self._admitted(time.monotonic() - t0, handed=True)

    def hand_back(self, response: web.StreamResponse, *, refused: bool = False) -> web.StreamResponse:
        """``response``, closing its connection after it when ``hand_back`` is on and this process is busy: the
        request was refused, or others wait for a slot now."""
        if self.config.hand_back and (refused or self._waiters):
            response.force_close()
            self.metrics.handed_back.inc()
        return response

    def _abandon(self, waiter: asyncio.Future[None]) -> bool:
        """Leave the queue; False when ``waiter`` was already handed a slot (the caller owns it)."""
        if waiter.done():
            return False
        waiter.cancel()
        self._waiters.remove(waiter)
        self.metrics.queued.set(len(self._waiters))
        return True

    def _admitted(self, waited_s: float, *, handed: bool = False) -> None:
        if not handed:  # a handed-over slot was counted by the release that handed it
            self.active += 1
        self.metrics.admitted.inc()
        self.metrics.wait.observe(waited_s)
        self.metrics.active.set(self.active)

    def _release(self) -> None:
        if self.active >= self.config.max_active:
            self._busy_releases.append(self._clock())
        while self._waiters:  # hand the slot to the longest waiter still waiting
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self.metrics.queued.set(len(self._waiters))
                return
        self.metrics.queued.set(0)
        self.active = max(0, self.active - 1)
        self.metrics.active.set(self.active)


ADMISSION_KEY: web.AppKey[AdmissionControl] = web.AppKey("admission", AdmissionControl)
"""Where the service keeps its admission control."""


def overloaded_response(exc: Overloaded) -> web.Response:
    """``503`` with ``Retry-After`` and the API's error shape (``error.reason``: why the request was refused)."""
    body = {"error": {"field": None, "message": str(exc), "reason": exc.reason}}
    return web.json_response(body, status=503, headers={"Retry-After": str(exc.retry_after_s)})


CURRENT_ADMISSION: ContextVar[AdmissionControl | None] = ContextVar("fabric_admission", default=None)
"""The service's admission control around ``/mcp`` requests (set by
:func:`fabric.serve.tenant_engines.scope_middleware`),
so the MCP ``query`` and ``cite`` tools queue and shed like ``POST /v1/search`` (``None`` on stdio: one client)."""
