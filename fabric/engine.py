"""The engine: validate → pre-flight (with lane warm-up) → bind constraints → plan → execute → fuse → page.

Usage::

    async with Engine(load_settings()) as engine:
        result = await engine.search(parse_request({"query": "..."}, engine.settings))

Lanes are built from ``settings.lanes`` (enabled lanes plus their fallback targets) at :meth:`Engine.open`;
a lane whose backend cannot be built is reported with status ``error`` in every result and never crashes
the engine. Tests and benchmarks may inject ``lanes`` (and ``resources``) directly.

Staged retrieval (seed 000): lanes with ``stage = 2`` run only when stage-1 fusion yields fewer than
``fusion.stages.min_must_count`` items, and are skipped when their provider's observed median latency
exceeds ``stage2_cap_ms`` (they are cut at that cap otherwise). ``SearchResult.stages`` records
``stage2_should_trigger``, ``stage2_used``, ``stage2_skipped_budget`` and the latency split.

Pagination re-runs the query and slices the deterministic fused list at the cursor's offset
(:mod:`fusion.cursor`). The cursor secret is ``FABRIC_CURSOR_SECRET`` when set, else a random secret
created once under the home (``cursor.secret``), read when the engine opens.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self

import structlog

from fabric.budgets import lane_budget_ms, total_budget_ms
from fabric.config import LaneConfig, Settings
from fabric.constraints import BUDGET_MULTIPLIERS, bind_constraints
from fabric.cursor_secret import CURSOR_SECRET_ENV, load_cursor_secret
from fabric.errors import ConfigError, PartialResultError
from fabric.executor import LaneExecutor, PlannedLane, RunStats
from fabric.logs import enabled, new_trace_id
from fabric.metrics import EngineMetrics
from fabric.models import Hit, LaneKind, LaneOutcome, LaneRequest, LaneStatus, SearchRequest, SearchResult
from fabric.penalties import ProviderPenalties
from fabric.preflight import LoopLagMonitor, Preflight
from fabric.resources import close_resources, open_resources
from fabric.router.planner import Router
from fabric.router.strategies import RouteRecord
from fabric.stages import run_stage2
from fusion.cursor import decode_cursor, encode_cursor, fingerprint
from fusion.pipeline import FusionContext, FusionOutput, fuse
from lanes.base import Lane, LaneResources, LaneSpec
from lanes.registry import build_lane

__all__ = ["CURSOR_SECRET_ENV", "Engine"]

log = structlog.get_logger(__name__)

_OPEN_TIMEOUT_S = 60.0


class Engine:
    """Federated search over the configured lanes (see the module docstring).

    Args:
        settings: loaded settings.
        lanes: lanes by name to use instead of building them from ``settings.lanes``.
        resources: shared resources to inject instead of opening them (then not closed by the engine).
        clock: monotonic seconds for provider penalties (injected in tests).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        lanes: Mapping[str, Lane] | None = None,
        resources: LaneResources | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._given_lanes = dict(lanes) if lanes is not None else None
        self._given_resources = resources
        self.resources: LaneResources | None = resources
        self.lanes: dict[str, Lane] = {}
        self.build_errors: dict[str, str] = {}
        self.metrics = EngineMetrics()
        self.penalties = ProviderPenalties(settings.penalties, clock=clock)
        self.executor = LaneExecutor({}, penalties=self.penalties, metrics=self.metrics)
        self.preflight = Preflight(settings.preflight, clock=clock)
        self.loop_lag = LoopLagMonitor()
        self.router = Router(settings.router, executor=self.executor, home=settings.home)
        self._secret = b""
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
                self._build_lanes(self.resources)
            self.executor.lanes = dict(self.lanes)
            self.executor.web_cache = self.resources.web_cache
            self.executor.unavailable = dict(self.build_errors)
            for lc in self.settings.lanes.values():
                if lc.name not in self.lanes and lc.name not in self.build_errors:
                    why = f"lane disabled in configuration (lanes.{lc.name}.enabled = false)"
                    self.executor.unavailable[lc.name] = why
            self.preflight.http = self.resources.http
            self._secret = load_cursor_secret(self.settings.home)
            self._unopened = set(self.lanes)
            await asyncio.gather(self._warm_up(sorted(self.lanes), _OPEN_TIMEOUT_S), self._warm_embedder())
        except BaseException:
            await self.aclose()
            raise
        self._warm_fusion()
        self.loop_lag.start()
        self._opened = True
        log.info("engine_opened", lanes=sorted(self.lanes), unavailable=sorted(self.build_errors))

    def _needs_embedder(self) -> bool:
        """Only a real vector lane needs the embedder (loading a model is slow; fake lanes do not need it)."""
        if self._given_lanes is not None:
            return False
        return any(lc.kind is LaneKind.VECTOR and lc.backend != "fake" for lc in self.settings.lanes.values())

    def _build_lanes(self, resources: LaneResources) -> None:
        wanted: dict[str, LaneConfig | None] = {lc.name: lc for lc in self.settings.enabled_lanes()}
        for lc in list(wanted.values()):
            if lc is not None and lc.fallback and lc.fallback not in wanted:
                wanted[lc.fallback] = self.settings.lanes.get(lc.fallback)
        for name, lc in wanted.items():
            if lc is None:  # a pseudo-lane such as web_cache: its backend is its name
                parent = next(c for c in self.settings.lanes.values() if c.fallback == name)
                spec = LaneSpec(name=name, kind=parent.kind, backend=name, options=parent.options)
            else:
                spec = LaneSpec(name=name, kind=lc.kind, backend=lc.backend, options=lc.options)
            try:
                self.lanes[name] = build_lane(spec, resources)
            except Exception as exc:  # a broken backend is reported per query, never fatal to the engine
                msg = str(exc) if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}"
                self.build_errors[name] = f"lane could not be built: {msg}"
                log.warning("lane_build_failed", lane=name, backend=spec.backend, error=msg)

    async def _warm_up(self, names: list[str], timeout_s: float) -> None:
        """Open lanes concurrently; a lane that fails to open is retried at the next query."""

        async def one(name: str) -> None:
            try:
                async with asyncio.timeout(timeout_s):
                    await self.lanes[name].open()
                self._unopened.discard(name)
            except Exception as exc:  # the lane's search will fail and be reported; the engine stays up
                log.warning("lane_open_failed", lane=name, error=f"{type(exc).__name__}: {exc}")

        await asyncio.gather(*(one(n) for n in names if n in self._unopened))

    async def _warm_embedder(self) -> None:
        """Load the embedding model now rather than inside the first query's vector-lane budget.

        Uses the embedder's ``warm()`` (``fabric.embeddings``; a cached embedder must load its model even when
        the warm-up text is cached) when it has one, else embeds a short text. Fail-open.
        """
        embedder = self.resources.embedder if self.resources is not None else None
        if embedder is None or self._given_resources is not None:
            return
        warm = getattr(embedder, "warm", None) or getattr(embedder, "warm_up", None)
        try:
            async with asyncio.timeout(_OPEN_TIMEOUT_S):
                if callable(warm):
                    await asyncio.to_thread(warm)
                else:
                    await asyncio.to_thread(embedder.embed, ["warm-up"])
        except Exception as exc:  # the vector lane reports the embedder's failure per query; lexical lanes go on
            log.warning("embedder_warm_up_failed", error=f"{type(exc).__name__}: {exc}")

    def _warm_fusion(self) -> None:
        """Run fusion once on a tiny synthetic input so the first query does not pay its first-call costs."""
        hits = tuple(
            Hit(id=f"warm-{i}", rank=i + 1, score=1.0 / (i + 1), title=f"warm {i}", text=f"warm up text {i}")
            for i in range(3)
        )
        outcomes = {
            name: LaneOutcome(lane=name, kind=kind, provider="warm", status=LaneStatus.SUCCESS, hits=hits)
            for name, kind in (("warm-a", LaneKind.KEYWORD), ("warm-b", LaneKind.VECTOR))
        }
        ctx = FusionContext(config=self.settings.fusion, now=datetime.now(UTC))
        tuple(fuse(outcomes, ctx).items)

    async def aclose(self) -> None:
        """Close lanes and the resources the engine opened; abandoned calls are cancelled, not awaited."""
        await self.loop_lag.stop()
        for task in list(self.executor.abandoned):
            task.cancel()
        for name, lane in self.lanes.items():
            try:
                await lane.aclose()
            except Exception as exc:  # closing must close everything else too
                log.warning("lane_close_failed", lane=name, error=str(exc))
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

    def _fingerprint(self, request: SearchRequest, names: list[str]) -> str:
        c = request.constraints
        return fingerprint(
            {
                "query": request.query,
                "mode": request.mode.value,
                "constraints": [c.time_range, c.sources, c.cost, c.depth, c.citations_required],
                "fusion": (request.fusion or self.settings.fusion.mode).value,
                "lanes": names,
                "top_k": request.top_k,
                "route": request.route,
            }
        )

    # ------------------------------------------------------------------ search

    async def search(self, request: SearchRequest) -> SearchResult:
        """Answer ``request`` within its budget.

        Raises:
            QueryError: a bad cursor (field ``cursor``).
            PartialResultError: strict mode and some planned lane did not succeed.
        """
        if not self._opened:
            raise RuntimeError("Engine.open() must be awaited before search()")
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
        loop = asyncio.get_running_loop()
        s = self.settings
        mode_cfg = s.mode(request.mode)
        multiplier = BUDGET_MULTIPLIERS.get(request.constraints.cost or "medium", 1.0)
        deadline = loop.time() + total_budget_ms(mode_cfg, request.budget_ms, multiplier) / 1000.0
        names = self._plan_names(request)
        fp = self._fingerprint(request, names) if request.cursor else ""
        offset = decode_cursor(request.cursor, fp, self._secret) if request.cursor else 0
        plan: list[PlannedLane] = []
        for name in names:
            lc = self._lane_config(name)
            plan.append(
                PlannedLane(
                    name=name,
                    budget_ms=lane_budget_ms(mode_cfg, lc, multiplier),
                    weight=lc.weight,
                    fallback=lc.fallback if lc.fallback in self.lanes else None,
                    fallback_reserve_ms=lc.fallback_reserve_ms,
                    stage=lc.stage,
                )
            )

        now = datetime.now(UTC)
        t_pf = time.perf_counter()
        pf_run = self.preflight.run(
            request.query,
            current_year=now.year,
            budget_ms=mode_cfg.preflight_ms,
            lane_budgets_ms={p.name: p.budget_ms for p in plan if p.stage == 1},
            time_left_ms=(deadline - loop.time()) * 1000.0,
            inflight=self._inflight,
            loop_lag_ms=self.loop_lag.lag_ms,
            enabled=request.preflight,
        )
        unopened = [n for n in names if n in self._unopened]
        if unopened:
            warm_s = max(0.0, min(mode_cfg.preflight_ms / 1000.0, (deadline - loop.time()) / 2))
            pf, _ = await asyncio.gather(pf_run, self._warm_up(unopened, warm_s))
        else:
            pf = await pf_run
        preflight_ms = (time.perf_counter() - t_pf) * 1000.0
        chat_preflight = bool(s.preflight.chat_url) and not (pf.reason or "").startswith(("disabled", "pressure"))

        bound = bind_constraints(request.constraints, now=now, preflight=pf)
        lane_top_k = s.engine.lane_top_k if bound.max_results is None else min(s.engine.lane_top_k, bound.max_results)
        lane_request = LaneRequest(query=pf.refined_query, top_k=lane_top_k, constraints=bound, trace_id=trace_id)
        routed = None  # seed 004: the router picks the strategy's lanes (and reuses its probe) unless route=all
        if request.route != "all":
            embedder = self.resources.embedder if self.resources is not None else None
            routed = await self.router.plan(
                request, pf, plan, lane_request, now=now, deadline=deadline, embedder=embedder
            )
            plan, lane_request = routed.plan, routed.lane_request
        done = dict(routed.done) if routed is not None else {}
        ctx = FusionContext(
            config=s.fusion,
            now=now,
            mode=request.fusion,
            authority=s.authority,
            authority_default=s.authority_default,
            stage_of={p.name: p.stage for p in plan},
        )

        t_lanes = time.perf_counter()
        waited = RunStats()
        outcomes = done | await self.executor.run(
            [p for p in plan if p.stage == 1 and p.name not in done], lane_request, deadline=deadline, stats=waited
        )
        stage1_ms = (time.perf_counter() - t_lanes) * 1000.0
        lanes_ms = waited.wait_ms + (routed.wait_ms if routed is not None else 0.0)
        stage2 = [p for p in plan if p.stage == 2]
        stages: dict[str, Any] = {
            "stage2_should_trigger": False,
            "stage2_used": False,
            "stage2_skipped_budget": False,
            "stage2_lanes": [],
            "stage1_ms": round(stage1_ms, 3),
            "stage2_ms": 0.0,
        }
        by_design: set[str] = set()
        if stage2:
            stages = await run_stage2(
                stage2,
                outcomes,
                lane_request,
                deadline=deadline,
                ctx=ctx,
                executor=self.executor,
                config=s.fusion.stages,
                by_design=by_design,
                stats=(waited2 := RunStats()),
            )
            stages["stage1_ms"] = round(stage1_ms, 3)
            lanes_ms += waited2.wait_ms

        t_fuse = time.perf_counter()
        fused = fuse(outcomes, ctx)
        fusion_ms = (time.perf_counter() - t_fuse) * 1000.0
        end = offset + request.top_k
        page = tuple(fused.items[offset:end])
        next_cursor = None
        if end < len(fused.items):
            next_cursor = encode_cursor(end, fp or self._fingerprint(request, names), self._secret)
        ordered = {p.name: outcomes[p.name] for p in plan}
        not_ok = {n: o.status.value for n, o in ordered.items() if o.status is not LaneStatus.SUCCESS}
        partial = any(n not in by_design for n in not_ok)
        total_ms = (time.perf_counter() - t0) * 1000.0
        self._observe(ordered, fused, total_ms, partial)
        if enabled(logging.DEBUG):
            log.debug(
                "search_finished",
                total_ms=round(total_ms, 3),
                partial=partial,
                lanes={n: o.status.value for n, o in ordered.items()},
            )
        if request.strict and partial:
            raise PartialResultError({n: v for n, v in not_ok.items() if n not in by_design})
        return SearchResult(
            query=request.query,
            mode=request.mode,
            trace_id=trace_id,
            items=page,
            lanes=ordered,
            preflight=pf,
            next_cursor=next_cursor,
            partial=partial,
            dedup={"candidates": fused.candidates, "removed": fused.removed, **fused.duplicates},
            timings={
                "total_ms": total_ms,
                "preflight_ms": preflight_ms,
                "lanes_ms": lanes_ms,
                "fusion_ms": fusion_ms,
                # A chat pre-flight is waiting on a remote lane; rule-based pre-flight is the engine's own work.
                "overhead_ms": max(0.0, total_ms - lanes_ms - (preflight_ms if chat_preflight else 0.0)),
            },
            stages=stages,
            fusion_mode=request.fusion or s.fusion.mode,
            route=(routed.record if routed is not None else RouteRecord.federation(list(ordered))).to_dict(),
        )

    def _observe(
        self, outcomes: Mapping[str, LaneOutcome], fused: FusionOutput, total_ms: float, partial: bool
    ) -> None:
        m = self.metrics
        m.observe_lanes(outcomes)
        m.observe_query(total_ms=total_ms, partial=partial, candidates=fused.candidates, removed=fused.removed)
        for out in outcomes.values():
            m.set_provider(out.provider, suspended=self.penalties.is_suspended(out.provider), health=out.health)

    # ------------------------------------------------------------------ health

    def health(self) -> dict[str, Any]:
        """Lanes (built or not, provider health), abandoned calls, in-flight queries and metric summary."""
        lanes: dict[str, Any] = {}
        for name in sorted(set(self.lanes) | set(self.build_errors)):
            lane = self.lanes.get(name)
            lanes[name] = {
                "built": lane is not None,
                "opened": lane is not None and name not in self._unopened,
                "provider": lane.provider if lane is not None else None,
                "error": self.build_errors.get(name),
                "health": self.penalties.snapshot(lane.provider) if lane is not None else None,
            }
        return {
            "open": self._opened,
            "lanes": lanes,
            "inflight": self._inflight,
            "loop_lag_ms": round(self.loop_lag.lag_ms, 3),
            "abandoned_running": self.executor.abandoned_running(),
            "abandoned_total": self.executor.abandoned_total,
            "metrics": self.metrics.summary(),
        }
