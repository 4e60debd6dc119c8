"""The engine: validate → pre-flight (with lane warm-up) → bind constraints → plan → execute → fuse → page.

Usage: ``async with Engine(load_settings()) as engine: result = await engine.search(SearchRequest(query="..."))``
(the front door, :func:`fabric.open`, wraps it).

Lanes are built from ``settings.lanes`` (enabled lanes plus fallback targets) at :meth:`Engine.open`; a lane whose
backend cannot be built is reported ``error`` in every result, never a crash. Tests may inject ``lanes``.

Staged retrieval (:mod:`fabric.query.stages`): lanes with ``stage = 2`` run only when stage-1 fusion yields
fewer than ``fusion.stages.min_must_count`` items, and are skipped when their provider's observed median latency
exceeds ``stage2_cap_ms`` (they are cut at that cap otherwise); stage budgets N1/N2 and the appended cap apply.
``SearchResult.stages`` records the stage-2 outcome, trigger, use, budget skips and the latency split.

Pagination re-runs the query and slices the deterministic fused list at the cursor's offset (:mod:`fusion.cursor`),
signed with ``FABRIC_CURSOR_SECRET``, else a random secret created once under the home, read when the engine opens.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self

import structlog

from fabric.core.errors import PartialResultError
from fabric.core.logs import enabled, get_logger, new_trace_id
from fabric.core.models import (
    LaneKind,
    LaneOutcome,
    LaneRequest,
    LaneStatus,
    PreflightResult,
    SearchRequest,
    SearchResult,
)
from fabric.query.budgets import total_budget_ms
from fabric.query.constraints import BUDGET_MULTIPLIERS, bind_constraints
from fabric.query.cursor_secret import CURSOR_SECRET_ENV, load_cursor_secret
from fabric.query.executor import LaneExecutor, RunStats
from fabric.query.fallbacks import fuse_once
from fabric.query.lane_setup import (
    OPEN_TIMEOUT_S,
    active_confidence,
    build_lanes,
    close_lanes,
    lane_health,
    needs_embedder,
    open_lanes,
    unavailable_lanes,
    warm_embedder,
    warm_fusion,
)
from fabric.query.metrics import EngineMetrics
from fabric.query.penalties import ProviderPenalties
from fabric.query.plan import QueryPlan, QueryRun, build_result, plan_lanes, request_fingerprint
from fabric.query.preflight import LoopLagMonitor, Preflight
from fabric.query.resources import close_resources, open_resources
from fabric.query.router.planner import RoutedPlan, Router
from fabric.query.stages import cap_appended, no_stage2, run_stage2, stage_request
from fabric.query.validation import check_request
from fabric.settings import LaneConfig, Settings
from fusion.cursor import decode_cursor, encode_cursor
from fusion.pipeline import FusionContext, fuse
from lanes.base import Lane, LaneResources

__all__ = ["CURSOR_SECRET_ENV", "Engine"]

log = get_logger(__name__)


class Engine:
    """Federated search over the configured lanes (see the module docstring).

    Args:
        settings: loaded settings.
        lanes: lanes by name to use instead of building them from ``settings.lanes``.
        resources: shared resources to inject instead of opening them (then not closed by the engine).
        clock: monotonic seconds for provider penalties (injected in tests).
        metrics: the metrics to record into (tenant engines share the service's); default a new registry.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        lanes: Mapping[str, Lane] | None = None,
        resources: LaneResources | None = None,
        clock: Callable[[], float] = time.monotonic,
        metrics: EngineMetrics | None = None,
    ) -> None:
        self.settings = settings
        self._given_lanes = dict(lanes) if lanes is not None else None
        self._given_resources = resources
        self.resources: LaneResources | None = resources
        self.lanes: dict[str, Lane] = {}
        self.build_errors: dict[str, str] = {}
        self.metrics = metrics or EngineMetrics()
        self.penalties = ProviderPenalties(settings.penalties, clock=clock)
        self.executor = LaneExecutor({}, penalties=self.penalties, metrics=self.metrics)
        self.executor.confidence = active_confidence(settings)
        self.preflight = Preflight(settings.preflight, clock=clock)
        self.loop_lag = LoopLagMonitor()
        self.router = Router(settings.router, executor=self.executor, home=settings.home)
        self._secret = b""
        self.secret_source: Callable[[], Awaitable[bytes]] | None = None
        """Where :meth:`open` reads the cursor secret (the replicas' shared database); default the home's file."""
        self._unopened: set[str] = set()
        self._inflight = 0
        self._opened = False

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        """Open resources, build and warm up lanes, read the cursor secret. Idempotent."""
        if self._opened:
            return
        self.executor.reserve_threads()
        if self.resources is None:
            self.resources = await open_resources(self.settings, embedder=self._needs_embedder())
        try:
            if self._given_lanes is not None:
                self.lanes = dict(self._given_lanes)
            else:
                self.lanes, self.build_errors = build_lanes(self.settings, self.resources)
            self.executor.lanes = dict(self.lanes)
            self.executor.web_cache = self.resources.web_cache
            self.executor.unavailable = unavailable_lanes(self.settings, self.lanes, self.build_errors)
            self.preflight.http = self.resources.http
            source = self.secret_source
            self._secret = await source() if source is not None else load_cursor_secret(self.settings.home)
            self._unopened = set(self.lanes)
            embedder = self.resources.embedder if self._given_resources is None else None
            await asyncio.gather(self._warm_up(sorted(self.lanes), OPEN_TIMEOUT_S), warm_embedder(embedder))
        except BaseException:
            await self.aclose()
            raise
        warm_fusion(self.settings.fusion)
        self.loop_lag.start()
        self._opened = True
        log.info("engine_opened", lanes=sorted(self.lanes), unavailable=sorted(self.build_errors))

    def _needs_embedder(self) -> bool:
        """Only a real vector lane needs the embedder (loading a model is slow; fake lanes do not need it)."""
        return self._given_lanes is None and needs_embedder(self.settings)

    async def _warm_up(self, names: list[str], timeout_s: float) -> None:
        """Open lanes concurrently; a lane that fails to open is retried at the next query."""
        await open_lanes(self.lanes, [n for n in names if n in self._unopened], self._unopened, timeout_s)

    async def aclose(self) -> None:
        """Close lanes and the resources the engine opened; abandoned calls are cancelled, not awaited."""
        await self.loop_lag.stop()
        for task in list(self.executor.abandoned):
            task.cancel()
        await close_lanes(self.lanes)
        if self._given_resources is None and self.resources is not None:
            await close_resources(self.resources)
            self.resources = None
        self._opened = False

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ planning

    def _lane_config(self, name: str) -> LaneConfig:
        lc = self.settings.lanes.get(name)
        if lc is not None:
            return lc
        lane = self.lanes.get(name)
        return LaneConfig(name=name, kind=lane.kind if lane else LaneKind.KEYWORD, backend="injected")

    def _plan_names(self, request: SearchRequest) -> list[str]:
        if request.lanes is not None:
            return list(request.lanes)
        if self._given_lanes is not None:
            return [n for n in self._given_lanes if n not in self.settings.lanes or self.settings.lanes[n].enabled]
        return [lc.name for lc in self.settings.enabled_lanes()]

    # ------------------------------------------------------------------ search

    async def search(self, request: SearchRequest) -> SearchResult:
        """Answer ``request`` within its budget.

        Raises:
            QueryError: a request over the settings' limits (the query's size, ``top_k``, unknown lanes) or a bad
                cursor (field ``cursor``).
            PartialResultError: strict mode and some planned lane did not succeed.
        """
        if not self._opened:
            raise RuntimeError("Engine.open() must be awaited before search()")
        request = check_request(request, self.settings)
        trace_id = new_trace_id()
        tokens = structlog.contextvars.bind_contextvars(trace_id=trace_id)
        self._inflight += 1
        try:
            return await self._search(request, trace_id)
        finally:
            self._inflight -= 1
            structlog.contextvars.reset_contextvars(**tokens)

    async def _search(self, request: SearchRequest, trace_id: str) -> SearchResult:
        t0 = time.perf_counter()
        plan = self.plan(request)
        run = await self.run(request, plan, trace_id)
        if run.routed is not None:  # the router policy: the router narrowed the plan to its strategy's lanes
            plan = dataclasses.replace(plan, lanes=tuple(run.routed.plan))
        return self._build(request, plan, run, trace_id, t0)

    def plan(self, request: SearchRequest) -> QueryPlan:
        """Decide what ``request`` runs: its lanes (budget, weight, fallback, stage), deadline and page offset.

        The seam for routing: the lanes come from the request, else every enabled lane; a router narrows or
        re-budgets them here, and the run and the result follow the plan as given.

        Raises:
            QueryError: a request over the settings' limits (the query's size, ``top_k``, unknown lanes) or a bad
                cursor (field ``cursor``).
        """
        mode = self.settings.mode(request.mode)
        multiplier = BUDGET_MULTIPLIERS.get(request.constraints.cost or "medium", 1.0)
        deadline = asyncio.get_running_loop().time() + total_budget_ms(mode, request.budget_ms, multiplier) / 1000.0
        names = self._plan_names(request)
        # Taken from the lanes asked for, before a router narrows them, so every page of a query has one fingerprint.
        fp = request_fingerprint(request, names, self.settings.fusion.mode)
        return QueryPlan(
            lanes=plan_lanes(
                names, {n: self._lane_config(n) for n in names}, mode, multiplier, self.lanes, request.weights
            ),
            mode=mode,
            multiplier=multiplier,
            deadline=deadline,
            now=datetime.now(UTC),
            offset=decode_cursor(request.cursor, fp, self._secret) if request.cursor else 0,
            fingerprint=fp,
        )

    async def run(self, request: SearchRequest, plan: QueryPlan, trace_id: str) -> QueryRun:
        """Run ``plan``: pre-flight (warming unopened lanes), bind constraints, call the lanes, fuse."""
        s = self.settings
        t_pf = time.perf_counter()
        pf = await self._preflight(request, plan)
        preflight_ms = (time.perf_counter() - t_pf) * 1000.0
        bound = bind_constraints(request.constraints, now=plan.now, preflight=pf, engine=s.engine)
        lane_top_k = s.engine.lane_top_k if bound.max_results is None else min(s.engine.lane_top_k, bound.max_results)
        lane_request = LaneRequest(query=pf.refined_query, top_k=lane_top_k, constraints=bound, trace_id=trace_id)
        routed = await self._route(request, plan, pf, lane_request)
        if routed is not None:
            plan, lane_request = dataclasses.replace(plan, lanes=tuple(routed.plan)), routed.lane_request
        ctx = FusionContext(
            config=s.fusion,
            now=plan.now,
            mode=request.fusion,
            authority=s.authority,
            authority_default=s.authority_default,
            stage_of={p.name: p.stage for p in plan.lanes},
        )
        done = dict(routed.done) if routed is not None else {}
        outcomes, stages, by_design, lanes_ms = await self._call_lanes(plan, lane_request, ctx, done)
        t_fuse = time.perf_counter()
        # the staged-retrieval policy: <= 10 appended
        fused = cap_appended(fuse(outcomes, ctx), stages, s.fusion.stages.max_appended)
        return QueryRun(
            preflight=pf,
            outcomes=outcomes,
            fused=fused,
            stages=stages,
            by_design=by_design,
            preflight_ms=preflight_ms,
            lanes_ms=lanes_ms + (routed.wait_ms if routed is not None else 0.0),
            fusion_ms=(time.perf_counter() - t_fuse) * 1000.0,
            chat_preflight=bool(s.preflight.chat_url) and not (pf.reason or "").startswith(("disabled", "pressure")),
            routed=routed,
            bound=lane_request.constraints,
        )

    async def _route(
        self, request: SearchRequest, plan: QueryPlan, pf: PreflightResult, lane_request: LaneRequest
    ) -> RoutedPlan | None:
        """The router (``route != "all"``): the strategy's lanes and filters, with the probe's outcomes."""
        if request.route == "all":
            return None
        embedder = self.resources.embedder if self.resources is not None else None
        return await self.router.plan(
            request, pf, plan.lanes, lane_request, now=plan.now, deadline=plan.deadline, embedder=embedder
        )

    async def _preflight(self, request: SearchRequest, plan: QueryPlan) -> PreflightResult:
        """The pre-flight, with a warm-up of the planned lanes not opened yet in parallel."""
        loop = asyncio.get_running_loop()
        pf_run = self.preflight.run(
            request.query,
            current_year=plan.now.year,
            budget_ms=plan.mode.preflight_ms,
            lane_budgets_ms={p.name: p.budget_ms for p in plan.stage(1)},
            time_left_ms=(plan.deadline - loop.time()) * 1000.0,
            inflight=self._inflight,
            loop_lag_ms=self.loop_lag.lag_ms,
            enabled=request.preflight,
        )
        unopened = [n for n in plan.names if n in self._unopened]
        if not unopened:
            return await pf_run
        warm_s = max(0.0, min(plan.mode.preflight_ms / 1000.0, (plan.deadline - loop.time()) / 2))
        pf, _ = await asyncio.gather(pf_run, self._warm_up(unopened, warm_s))
        return pf

    async def _call_lanes(
        self, plan: QueryPlan, lane_request: LaneRequest, ctx: FusionContext, done: Mapping[str, LaneOutcome]
    ) -> tuple[dict[str, LaneOutcome], dict[str, Any], set[str], float]:
        """Stage 1, then stage 2 when stage 1 yields too few items (:func:`fabric.query.stages.run_stage2`).

        Returns the outcomes, the staged-retrieval record, the lanes skipped by design and the time waited on lanes.
        """
        t_lanes = time.perf_counter()
        waited = RunStats()
        stage2 = plan.stage(2)
        config = self.settings.fusion.stages
        request1 = stage_request(lane_request, 1, config) if stage2 else lane_request  # N1 only when staged
        todo = [p for p in plan.stage(1) if p.name not in done]  # ``done``: run already (the router's probe)
        outcomes = {**done, **await self.executor.run(todo, request1, deadline=plan.deadline, stats=waited)}
        outcomes = fuse_once(outcomes, plan.stage(1))  # a probe's fallback to a lane that then ran: fused once
        stage1_ms = round((time.perf_counter() - t_lanes) * 1000.0, 3)
        by_design: set[str] = set()
        if not stage2:
            return outcomes, no_stage2(stage1_ms), by_design, waited.wait_ms
        waited2 = RunStats()
        stages = await run_stage2(
            stage2,
            outcomes,
            lane_request,
            deadline=plan.deadline,
            ctx=ctx,
            executor=self.executor,
            config=config,
            by_design=by_design,
            stats=waited2,
        )
        stages["stage1_ms"] = stage1_ms
        return outcomes, stages, by_design, waited.wait_ms + waited2.wait_ms

    def _build(self, request: SearchRequest, plan: QueryPlan, run: QueryRun, trace_id: str, t0: float) -> SearchResult:
        """The result (:func:`fabric.query.plan.build_result`), observed in the metrics.

        Raises:
            PartialResultError: strict mode and some planned lane did not succeed (not by design).
        """
        result = build_result(
            request,
            plan,
            run,
            trace_id=trace_id,
            started=t0,
            cursor=lambda end, fp: encode_cursor(end, fp, self._secret),
            default_fusion=self.settings.fusion.mode,
            fusion_config=self.settings.fusion,
        )
        total_ms = result.timings["total_ms"]
        suspended = self.penalties.is_suspended
        self.metrics.observe_search(
            result.lanes, run.fused, total_ms=total_ms, partial=result.partial, suspended=suspended
        )
        lanes = {n: o.status.value for n, o in result.lanes.items()}
        if enabled(logging.DEBUG):
            log.debug("search_finished", total_ms=round(total_ms, 3), partial=result.partial, lanes=lanes)
        if request.strict and result.partial:
            raise PartialResultError(
                {n: v for n, v in lanes.items() if v != LaneStatus.SUCCESS.value and n not in run.by_design}
            )
        return result

    # ------------------------------------------------------------------ health

    def health(self) -> dict[str, Any]:
        """Lanes (built or not, provider health), abandoned calls, in-flight queries and metric summary."""
        return {
            "open": self._opened,
            "lanes": lane_health(self.lanes, self.build_errors, self._unopened, self.penalties),
            "inflight": self._inflight,
            "loop_lag_ms": round(self.loop_lag.lag_ms, 3),
            "abandoned_running": self.executor.abandoned_running(),
            "abandoned_total": self.executor.abandoned_total,
            "metrics": self.metrics.summary(),
        }
