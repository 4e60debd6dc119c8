"""The lane executor: every planned lane as its own task, cut at its budget, never late, never lost.

One deadline per query. Each lane is cut at ``min(start + lane budget, deadline)``. The lane call runs in an
inner task that the lane wrapper *waits on with a timeout* instead of awaiting it, so a lane that ignores
cancellation (a blocking SDK call in a worker thread, a swallowed ``CancelledError``) cannot delay the answer:
at its cut the call is cancelled, given a short grace, and then abandoned. Abandoned calls are kept in
:attr:`LaneExecutor.abandoned` (so they are not garbage-collected mid-flight), counted in metrics and logged.

A provider with too many abandoned calls still running is not called again until they end (a bulkhead): each
hung call may hold a worker thread, and the default thread pool is small (``min(32, cpus + 4)``), so without
the bulkhead a hung provider would starve every other lane that uses ``asyncio.to_thread``.

Every lane ends as a :class:`~fabric.core.models.LaneOutcome` (success, timeout, error, skipped, suspended,
fallback). Provider penalties decide admission (suspended / half-open probe) and the weight factor. Failed or
suspended lanes run their configured fallback inside their own remaining budget (:mod:`fabric.query.fallbacks`).
After every successful call of a web-kind lane the executor writes the answer to the web response cache
(:class:`~fabric.net.webcache.WebCache`), which the ``web_cache`` fallback lane reads: web lanes only call and parse.
The ``sources`` constraint is applied to every call's hits here, after the cache write, the lane having been
asked for more hits (bounded) to make up for the ones it drops (:mod:`fabric.query.source_filter`); so is the
temporal route's hard year filter (:mod:`fabric.query.year_filter`). Retries
(:mod:`fabric.query.retries`) happen only on ``LaneUnavailable``, only while
budget is left and only within the provider's retry budget; ``except Exception`` appears only in
:meth:`LaneExecutor._call`.

Provider health sees only the provider's own time: each call carries a :class:`~fabric.core.lanepool.CallClock` that
times its worker-thread jobs and query encodings, and success latencies are recorded as that work time. A timeout
whose work took less than half the time the call was given spent it waiting in this process (threads, the
encoder's batch, the event loop: local overload); it is reported as a timeout but charged nothing
(``fabric_lane_uncharged_timeouts_total``). Calls that use no worker thread (HTTP lanes) are charged wall time.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fabric.core.errors import LaneError, LaneRejected
from fabric.core.lanepool import CallClock, context_for, is_lane_pool
from fabric.core.logs import get_logger
from fabric.core.models import Hit, LaneKind, LaneOutcome, LaneRequest, LaneStatus, make_lane_outcome
from fabric.net.webcache import WEB_CACHE_PROVIDER, WebCache
from fabric.query.bulkhead import Bulkhead, reserve_threads
from fabric.query.fallbacks import RunState, run_fallback
from fabric.query.lane_plan import PlannedLane, RunStats
from fabric.query.metrics import EngineMetrics
from fabric.query.penalties import ProviderPenalties
from fabric.query.retries import search_with_retries
from fabric.query.sanitize import sanitize_hits
from fabric.query.source_filter import restrict_sources, widen_request
from fabric.query.year_filter import lane_native, restrict_years, widen_for_years
from fabric.settings import LaneConfidence
from fusion.confidence import confidence_factor
from lanes.base import Lane

__all__ = ["LaneExecutor", "PlannedLane", "RunStats"]

log = get_logger(__name__)

_CHARGED_SHARE = 0.5
"""A timed-out call is charged to its provider only when its own work (:mod:`fabric.core.lanepool`) took at least this
share of the time it was given; otherwise it spent its time waiting in this process, which says nothing about the
provider."""


@dataclass(slots=True)
class _Call:
    hits: list[Hit] | None = None
    error: BaseException | None = None
    timed_out: bool = False


class LaneExecutor:
    """Runs planned lanes concurrently under one deadline.

    Args:
        lanes: every built lane by name (fallback targets included).
        penalties: provider health, owned by this executor.
        metrics: engine metrics (abandoned tasks), optional.
        max_attempts: attempts per call on ``LaneUnavailable`` (1 disables retries).
        cancel_grace_ms: how long a cancelled call may take to unwind before it is abandoned.
        max_abandoned_per_provider: bulkhead: abandoned calls still running before a provider is skipped.
        unproven_concurrency: calls in flight to a provider whose last outcome was not a success.
        lane_threads: worker threads :meth:`reserve_threads` guarantees for ``asyncio.to_thread`` lanes.
        web_cache: written after every successful web-kind call (None: nothing is cached).
        confidence: lane kind → the calibration of its weight by its top score (:mod:`fusion.confidence`).
    """

    def __init__(
        self,
        lanes: Mapping[str, Lane],
        *,
        penalties: ProviderPenalties | None = None,
        metrics: EngineMetrics | None = None,
        max_attempts: int = 2,
        cancel_grace_ms: float = 2.0,
        max_abandoned_per_provider: int = 2,
        unproven_concurrency: int = 4,
        lane_threads: int = 64,
        web_cache: WebCache | None = None,
        confidence: Mapping[LaneKind, LaneConfidence] | None = None,
    ) -> None:
        if max_attempts < 1 or cancel_grace_ms < 0 or max_abandoned_per_provider < 1 or lane_threads < 1:
            raise ValueError("max_attempts >= 1, cancel_grace_ms >= 0 and max_abandoned_per_provider >= 1 required")
        self.lanes = dict(lanes)
        self.penalties = penalties or ProviderPenalties()
        self.metrics = metrics
        self.max_attempts = max_attempts
        self.cancel_grace_s = cancel_grace_ms / 1000.0
        self.lane_threads = lane_threads
        self.bulkhead = Bulkhead(
            max_abandoned=max_abandoned_per_provider,
            unproven_concurrency=unproven_concurrency,
            is_proven=self.penalties.is_proven,
        )
        self.unavailable: dict[str, str] = {}
        """Lane name → why it could not be built (reported as status ``error``)."""
        self.web_cache = web_cache
        self.confidence: Mapping[LaneKind, LaneConfidence] = dict(confidence or {})
        self._fallbacks: OrderedDict[str, dict[str, asyncio.Future[tuple[str, bool]]]] = OrderedDict()

    # ------------------------------------------------------------------ public

    async def run(
        self,
        plan: Sequence[PlannedLane],
        request: LaneRequest,
        *,
        deadline: float,
        stats: RunStats | None = None,
    ) -> dict[str, LaneOutcome]:
        """Run ``plan`` concurrently; return one outcome per planned lane, by the time ``deadline`` passes.

        Args:
            plan: lanes to run.
            request: the lane request (refined query, bound constraints, trace id).
            deadline: absolute ``loop.time()`` by which every outcome must be known.
            stats: filled with the window spent waiting on lane calls (for overhead accounting).
        """
        loop = asyncio.get_running_loop()
        tasks: dict[str, asyncio.Task[LaneOutcome]] = {}
        state = RunState(tasks=tasks, failed=set(), stats=stats if stats is not None else RunStats())
        if request.trace_id:  # fallbacks are shared by every run of one trace (stage 1 and stage 2)
            state.fallbacks = self._fallbacks.setdefault(request.trace_id, state.fallbacks)
            self._fallbacks.move_to_end(request.trace_id)
            while len(self._fallbacks) > 1024:
                self._fallbacks.popitem(last=False)
        refused: dict[str, LaneOutcome] = {}
        for p in plan:
            outcome = self._refused_now(p, loop.time(), deadline)
            if outcome is not None:
                refused[p.name] = outcome
                state.failed.add(p.name)
            else:
                tasks[p.name] = loop.create_task(self._run_lane(p, request, deadline, state))
        if not plan:
            return {}
        # Wrappers end by their cut plus the grace; this backstop only matters if a lane blocks the loop itself.
        pending: set[asyncio.Task[LaneOutcome]] = set()
        if tasks:
            _, pending = await asyncio.wait(tasks.values(), timeout=max(0.0, deadline - loop.time()) + 0.05)
        out: dict[str, LaneOutcome] = {}
        for p in plan:
            if p.name in refused:
                out[p.name] = refused[p.name]
                continue
            task = tasks[p.name]
            if task in pending:
                task.cancel()
                self._abandon(task, self._provider(p.name))
                out[p.name] = self.outcome(p, LaneStatus.TIMEOUT, 0.0, error="lane wrapper overran the deadline")
            else:
                out[p.name] = task.result()
        return out

    def reserve_threads(self) -> None:
        """Make sure the loop's default thread pool has ``lane_threads`` workers (see :mod:`fabric.query.bulkhead`)."""
        reserve_threads(self.lane_threads)

    @property
    def abandoned(self) -> set[asyncio.Task[Any]]:
        """Lane calls abandoned past their cut and still running (referenced so they are not collected)."""
        return self.bulkhead.abandoned

    @property
    def abandoned_total(self) -> int:
        """Lane calls abandoned since the executor was created."""
        return self.bulkhead.abandoned_total

    def abandoned_running(self) -> int:
        """Abandoned lane calls that have not ended yet."""
        return len(self.abandoned)

    # ------------------------------------------------------------------ one lane

    def _provider(self, name: str) -> str:
        lane = self.lanes.get(name)
        return lane.provider if lane is not None else name

    def outcome(
        self,
        p: PlannedLane,
        status: LaneStatus,
        latency_ms: float,
        *,
        hits: Sequence[Hit] = (),
        error: str | None = None,
        lane: Lane | None = None,
        fallback_for: str | None = None,
    ) -> LaneOutcome:
        """Build the outcome of planned lane ``p`` (provider, kind, weight and health filled in)."""
        lane = lane or self.lanes.get(p.name)
        provider = lane.provider if lane is not None else p.name
        kind = lane.kind if lane is not None else LaneKind.KEYWORD
        health = self.penalties.snapshot(provider)
        calibration = self.confidence.get(kind) if hits else None  # the kind of the lane whose hits these are
        factor = confidence_factor(hits[0].score, calibration) if calibration is not None else 1.0
        return make_lane_outcome(
            p.name,
            kind,
            provider,
            status,
            latency_ms,
            tuple(hits),
            p.weight * float(health["penalty"]) * factor,
            error,
            fallback_for,
            health,
            factor,
        )

    def _refused_now(self, p: PlannedLane, start: float, deadline: float) -> LaneOutcome | None:
        """The outcome of a lane refused before any call (provider suspended or over its bulkhead) that has no
        fallback to run: decided on the spot, without a task. None: the lane runs in its own task."""
        lane = self.lanes.get(p.name)
        if lane is None or p.fallback or min(start + p.budget_ms / 1000.0, deadline) <= start:
            return None
        reason = self._refusal(lane.provider)
        if reason is None:
            return None
        latency_ms = (asyncio.get_running_loop().time() - start) * 1000.0
        return self.outcome(p, LaneStatus.SUSPENDED, latency_ms, error=reason, lane=lane)

    def _refusal(self, provider: str) -> str | None:
        """Why ``provider`` must not be called now (over its bulkhead, or suspended), or None."""
        return self.bulkhead.refusal(provider) or self.penalties.suspension_reason(provider)

    async def _run_lane(self, p: PlannedLane, request: LaneRequest, deadline: float, state: RunState) -> LaneOutcome:
        loop = asyncio.get_running_loop()
        start = loop.time()
        cut_at = min(start + p.budget_ms / 1000.0, deadline)
        lane = self.lanes.get(p.name)
        if lane is None:
            state.failed.add(p.name)
            why = self.unavailable.get(p.name, "lane not built")
            return await run_fallback(self, p, start, cut_at, request, state, LaneStatus.ERROR, why)
        if cut_at <= start:
            state.failed.add(p.name)
            return self.outcome(p, LaneStatus.SKIPPED, 0.0, error="no time left before the deadline")
        own_cut = cut_at
        if p.fallback and p.fallback_reserve_ms > 0:
            own_cut = max(start, cut_at - min(p.fallback_reserve_ms, p.budget_ms / 4.0) / 1000.0)
        status, error = await self.attempt(lane, request, own_cut, state.stats)
        latency_ms = (loop.time() - start) * 1000.0
        if isinstance(status, list):
            outcome = self.outcome(p, LaneStatus.SUCCESS, latency_ms, hits=status)
        else:
            state.failed.add(p.name)
            outcome = await run_fallback(self, p, start, cut_at, request, state, status, error)
        return outcome

    async def attempt(
        self, lane: Lane, request: LaneRequest, cut_at: float, stats: RunStats
    ) -> tuple[list[Hit] | LaneStatus, str | None]:
        """Admit, call and record one lane; hits on success, else (status, error text)."""
        loop = asyncio.get_running_loop()
        t_wait = loop.time()
        provider = lane.provider
        refusal = self._refusal(provider)
        if refusal is not None:
            return LaneStatus.SUSPENDED, refusal
        if not await self.bulkhead.acquire(provider, cut_at):
            stats.mark(t_wait, loop.time())
            n = self.bulkhead.inflight(provider)
            return LaneStatus.TIMEOUT, f"no call slot within budget: {provider} is unproven with {n} calls in flight"
        admission = self.penalties.admit(provider, timeout_s=cut_at - loop.time())
        if not admission.allowed:
            self.bulkhead.release(provider)
            return LaneStatus.SUSPENDED, admission.reason
        clock = CallClock() if is_lane_pool(loop) else None
        t0 = loop.time()
        asked = widen_request(widen_for_years(request, lane_native(lane)), lane.kind)
        call = await self._call(lane, asked, cut_at, clock)
        stats.mark(t_wait, loop.time())
        latency_ms = (loop.time() - t0) * 1000.0
        charged_ms = clock.charged_ms(latency_ms) if clock is not None else latency_ms
        if call.hits is not None:
            self.penalties.record_success(provider, charged_ms)
            if self.web_cache is not None and lane.kind is LaneKind.WEB and provider != WEB_CACHE_PROVIDER:
                self.web_cache.remember(request.query, provider, call.hits)
            c = request.constraints
            kept = restrict_years(restrict_sources(call.hits, lane.kind, c.source_filter), c.year_filter)
            return (kept if kept is call.hits and asked is request else kept[: request.top_k]), None
        if call.timed_out:
            if charged_ms < _CHARGED_SHARE * latency_ms:  # mostly waiting in this process: not the store's fault
                return LaneStatus.TIMEOUT, self._uncharged(provider, latency_ms, charged_ms)
            self.penalties.record_failure(provider, "timeout", latency_ms=charged_ms)
            return LaneStatus.TIMEOUT, f"no answer within {latency_ms:.0f} ms"
        exc = call.error
        failure = exc.failure if isinstance(exc, LaneError) else "error"
        suspend_s = exc.suspend_s if isinstance(exc, LaneRejected) else None
        self.penalties.record_failure(provider, failure, latency_ms=charged_ms, suspend_s=suspend_s)
        return LaneStatus.ERROR, f"{type(exc).__name__}: {exc}"

    def _uncharged(self, provider: str, latency_ms: float, charged_ms: float) -> str:
        """Record a timeout that the provider's own work does not explain (counted, not charged to its health)."""
        self.penalties.record_unjudged(provider)
        if self.metrics is not None:
            self.metrics.uncharged_timeouts.labels(provider).inc()
        return (
            f"no answer within {latency_ms:.0f} ms, of which {provider} worked {charged_ms:.0f} ms: the rest was "
            "spent waiting in this process (worker threads, query encoder, event loop), not charged to its health"
        )

    async def _call(self, lane: Lane, request: LaneRequest, cut_at: float, clock: CallClock | None) -> _Call:
        """Call ``lane.search`` in an inner task cut at ``cut_at``; never waits past ``cut_at`` + grace.

        With a ``clock``, the worker-thread jobs of the call are timed on it (:mod:`fabric.core.lanepool`)."""
        loop = asyncio.get_running_loop()
        call = _Call()
        context = context_for((clock,) if clock is not None else ())
        inner = loop.create_task(
            search_with_retries(lane, request, cut_at=cut_at, max_attempts=self.max_attempts, penalties=self.penalties),
            context=context,
        )
        provider = lane.provider
        inner.add_done_callback(lambda _: self.bulkhead.release(provider))
        done, _ = await asyncio.wait({inner}, timeout=max(0.0, cut_at - loop.time()))
        if not done:
            inner.cancel()
            done, _ = await asyncio.wait({inner}, timeout=self.cancel_grace_s)
            if not done:
                self._abandon(inner, lane.provider)
                call.timed_out = True
                return call
        if inner.cancelled():
            call.timed_out = True
            return call
        try:
            call.hits = sanitize_hits(inner.result(), lane=lane.name, provider=lane.provider)
        except (TimeoutError, asyncio.CancelledError):
            call.timed_out = True
        except Exception as exc:  # the per-lane wrapper: a failing lane never fails the query
            if not isinstance(exc, LaneError):
                log.warning("lane_crashed", lane=lane.name, provider=lane.provider, exc_info=exc)
            call.error = exc
        if call.hits is None and call.error is None:
            call.timed_out = True
        return call

    def _abandon(self, task: asyncio.Task[Any], provider: str) -> None:
        def changed() -> None:
            if self.metrics is not None:
                self.metrics.abandoned_running.set(len(self.bulkhead.abandoned))

        self.bulkhead.abandon(task, provider, changed)
        if self.metrics is not None:
            self.metrics.abandoned.inc()
        log.warning("lane_call_abandoned", provider=provider, running=len(self.bulkhead.abandoned))
