"""Tests for the lane executor: budgets, abandonment, fallbacks, retries, suspensions."""

from __future__ import annotations

import asyncio
import threading
from typing import ClassVar

import pytest

from fabric.core.errors import LaneRejected, LaneUnavailable
from fabric.core.models import BoundConstraints, Hit, LaneKind, LaneOutcome, LaneRequest, LaneStatus, SourceKind
from fabric.net.webcache import WebCache
from fabric.query.constraints import SOURCE_FILTERS
from fabric.query.executor import LaneExecutor, PlannedLane, RunStats
from fabric.query.metrics import EngineMetrics
from fabric.query.penalties import ProviderPenalties
from fabric.settings import LaneConfidence, PenaltyConfig
from lanes.base import BaseLane, LaneResources, LaneSpec
from lanes.fake import FakeLane, synthetic_hits
from lanes.web.web_cache import CachedWebLane
from tests.support.settings import quiet_logs  # noqa: F401

REQ = LaneRequest(query="q", top_k=5)


class StubbornLane(BaseLane):
    """Blocks a worker thread and ignores cancellation until it returns."""

    provider = "stubborn"

    def __init__(self, name: str = "stubborn", block_s: float = 0.6) -> None:
        from fabric.core.models import LaneKind

        super().__init__(LaneSpec(name=name, kind=LaneKind.KEYWORD, backend="fake"), LaneResources())
        self.block_s = block_s

    async def search(self, request: LaneRequest) -> list[Hit]:
        fut = asyncio.ensure_future(asyncio.to_thread(threading.Event().wait, self.block_s))
        while not fut.done():
            try:
                await asyncio.shield(fut)
            except asyncio.CancelledError:
                continue
        return synthetic_hits(self.name, 3)


class FlakyLane(FakeLane):
    """Raises LaneUnavailable on the first ``failures`` calls, then answers."""

    def __init__(self, failures: int, **kw) -> None:
        super().__init__(**kw)
        self.failures = failures

    async def search(self, request: LaneRequest) -> list[Hit]:
        self.calls += 1
        if self.calls <= self.failures:
            raise LaneUnavailable("connection refused", provider=self.provider)
        return self._hits[: request.top_k]


def plan(*names: str, budget_ms: float = 1000.0, fallback: dict | None = None) -> list[PlannedLane]:
    fb = fallback or {}
    return [PlannedLane(name=n, budget_ms=budget_ms, fallback=fb.get(n)) for n in names]


async def run(ex: LaneExecutor, lanes: list[PlannedLane], deadline_s: float = 5.0) -> dict:
    loop = asyncio.get_running_loop()
    return await ex.run(lanes, REQ, deadline=loop.time() + deadline_s)


class TestOutcomes:
    async def test_success_carries_hits_provider_weight(self) -> None:
        """A healthy lane succeeds with its hits, provider and weight."""
        ex = LaneExecutor({"a": FakeLane(name="a", provider="pa", hits=3)})
        out = await run(ex, [PlannedLane(name="a", budget_ms=1000, weight=0.5)])
        assert out["a"].status is LaneStatus.SUCCESS
        assert len(out["a"].hits) == 3
        assert out["a"].provider == "pa"
        assert out["a"].weight == 0.5
        assert out["a"].health["state"] == "closed"

    async def test_raising_lane_is_error_and_healthy_hits_survive(self) -> None:
        """A lane raising an arbitrary exception is an error; the other lane's hits are kept."""
        ex = LaneExecutor({"a": FakeLane(name="a", hits=4), "bad": FakeLane(name="bad", error=RuntimeError("boom"))})
        out = await run(ex, plan("a", "bad"))
        assert out["bad"].status is LaneStatus.ERROR
        assert "boom" in (out["bad"].error or "")
        assert out["a"].status is LaneStatus.SUCCESS
        assert len(out["a"].hits) == 4

    async def test_hanging_lane_times_out_at_budget(self) -> None:
        """An async lane that never answers is cut at its budget."""
        ex = LaneExecutor({"h": FakeLane(name="h", hang=True), "a": FakeLane(name="a")})
        out = await run(ex, plan("h", "a", budget_ms=150))
        assert out["h"].status is LaneStatus.TIMEOUT
        assert out["a"].status is LaneStatus.SUCCESS

    async def test_deadline_cuts_before_lane_budget(self) -> None:
        """A lane budget longer than the query deadline is cut at the deadline."""
        ex = LaneExecutor({"h": FakeLane(name="h", hang=True)})
        out = await run(ex, plan("h", budget_ms=60_000), deadline_s=0.03)
        assert out["h"].status is LaneStatus.TIMEOUT

    async def test_run_stats_cover_the_lane_wait(self) -> None:
        """RunStats records the window spent waiting on lane calls."""
        ex = LaneExecutor({"a": FakeLane(name="a", delay_ms=20)})
        stats = RunStats()
        loop = asyncio.get_running_loop()
        await ex.run(plan("a"), REQ, deadline=loop.time() + 5, stats=stats)
        assert stats.wait_ms > 0.0
        assert RunStats().wait_ms == 0.0

    async def test_no_time_left_is_skipped(self) -> None:
        """A lane planned after the deadline passed is skipped."""
        ex = LaneExecutor({"a": FakeLane(name="a")})
        out = await run(ex, plan("a"), deadline_s=-1.0)
        assert out["a"].status is LaneStatus.SKIPPED


class TestAbandonment:
    async def test_lane_ignoring_cancellation_is_abandoned(self) -> None:
        """A lane that ignores cancellation is abandoned: the answer returns while it still runs."""
        metrics = EngineMetrics()
        ex = LaneExecutor({"s": StubbornLane(), "a": FakeLane(name="a")}, metrics=metrics)
        out = await run(ex, plan("s", "a", budget_ms=150))
        assert out["s"].status is LaneStatus.TIMEOUT
        assert out["a"].status is LaneStatus.SUCCESS
        assert ex.abandoned_running() == 1
        assert not next(iter(ex.abandoned)).done()
        assert metrics.summary()["abandoned_tasks"] == 1
        await asyncio.wait(set(ex.abandoned))

    async def test_bulkhead_skips_provider_with_abandoned_calls(self) -> None:
        """A provider with too many abandoned calls still running is not called again."""
        lane = StubbornLane()
        ex = LaneExecutor({"s": lane}, max_abandoned_per_provider=1)
        await run(ex, plan("s", budget_ms=20))
        out = await run(ex, plan("s", budget_ms=20))
        assert out["s"].status is LaneStatus.SUSPENDED
        assert "bulkhead" in (out["s"].error or "")
        await asyncio.wait(set(ex.abandoned))

    async def test_abandoned_set_empties_when_call_ends(self) -> None:
        """An abandoned call leaves the set once its thread returns."""
        ex = LaneExecutor({"s": StubbornLane(block_s=0.3)})
        await run(ex, plan("s", budget_ms=10))
        await asyncio.wait(set(ex.abandoned))
        await asyncio.sleep(0)
        assert ex.abandoned_running() == 0
        assert ex.abandoned_total == 1


class TestFallbacks:
    async def test_fallback_runs_and_is_marked(self) -> None:
        """A failed lane's fallback answers under the failed lane's name, marked as fallback."""
        lanes = {"a": FakeLane(name="a", error=RuntimeError("x")), "b": FakeLane(name="b", provider="pb", hits=2)}
        ex = LaneExecutor(lanes)
        out = await run(ex, plan("a", fallback={"a": "b"}))
        assert out["a"].status is LaneStatus.FALLBACK
        assert out["a"].fallback_for == "a"
        assert out["a"].provider == "pb"
        assert [h.id for h in out["a"].hits] == ["b-0", "b-1"]

    async def test_fallback_already_planned_is_reused_not_doubled(self) -> None:
        """A fallback target that ran in the same query is reused without repeating its hits."""
        lanes = {"a": FakeLane(name="a", error=RuntimeError("x")), "b": FakeLane(name="b", hits=2)}
        ex = LaneExecutor(lanes)
        out = await run(ex, plan("a", "b", fallback={"a": "b"}))
        assert out["a"].status is LaneStatus.FALLBACK
        assert out["a"].hits == ()
        assert out["b"].status is LaneStatus.SUCCESS
        assert lanes["b"].calls == 1

    async def test_shared_fallback_runs_once(self) -> None:
        """Two failed lanes with the same unplanned fallback run it once; its hits are recorded once."""
        lanes = {
            "a": FakeLane(name="a", error=RuntimeError("x")),
            "g": FakeLane(name="g", error=RuntimeError("y")),
            "v": FakeLane(name="v", provider="pv", hits=3, delay_ms=5),
        }
        out = await run(LaneExecutor(lanes), plan("a", "g", fallback={"a": "v", "g": "v"}))
        assert out["a"].status is LaneStatus.FALLBACK
        assert out["g"].status is LaneStatus.FALLBACK
        assert lanes["v"].calls == 1
        assert sorted(len(o.hits) for o in out.values()) == [0, 3]

    async def test_fallback_shared_across_runs_of_one_trace(self) -> None:
        """A fallback a stage-1 lane ran is not run again for a stage-2 lane of the same trace id."""
        lanes = {
            "a": FakeLane(name="a", error=RuntimeError("x")),
            "g": FakeLane(name="g", error=RuntimeError("y")),
            "v": FakeLane(name="v", provider="pv", hits=3),
        }
        ex = LaneExecutor(lanes)
        loop = asyncio.get_running_loop()
        request = LaneRequest(query="q", top_k=5, trace_id="t1")
        first = await ex.run(plan("a", fallback={"a": "v"}), request, deadline=loop.time() + 5.0)
        second = await ex.run(plan("g", fallback={"g": "v"}), request, deadline=loop.time() + 5.0)
        other = await ex.run(plan("g", fallback={"g": "v"}), REQ, deadline=loop.time() + 5.0)
        assert [len(first["a"].hits), len(second["g"].hits), len(other["g"].hits)] == [3, 0, 3]
        assert second["g"].status is LaneStatus.FALLBACK
        assert lanes["v"].calls == 2

    async def test_fallback_limited_to_remaining_budget(self) -> None:
        """A fallback that would overrun the failed lane's budget is cut; the original failure stays."""
        lanes = {"a": FakeLane(name="a", error=RuntimeError("x")), "slow": FakeLane(name="slow", hang=True)}
        ex = LaneExecutor(lanes)
        out = await run(ex, plan("a", budget_ms=30, fallback={"a": "slow"}))
        assert out["a"].status is LaneStatus.ERROR
        assert "fallback 'slow'" in (out["a"].error or "")

    async def test_timed_out_lane_has_no_budget_for_fallback(self) -> None:
        """A lane that used its whole budget does not start a fallback past it."""
        lanes = {"h": FakeLane(name="h", hang=True), "b": FakeLane(name="b")}
        ex = LaneExecutor(lanes)
        out = await run(ex, plan("h", budget_ms=20, fallback={"h": "b"}))
        assert out["h"].status is LaneStatus.TIMEOUT
        assert lanes["b"].calls == 0

    async def test_reserve_leaves_a_timed_out_lane_time_for_its_fallback(self) -> None:
        """With a fallback reserve, a hung lane is cut early and its fallback answers inside the lane's budget."""
        lanes = {"h": FakeLane(name="h", hang=True), "b": FakeLane(name="b")}
        p = [PlannedLane(name="h", budget_ms=200, fallback="b", fallback_reserve_ms=60)]
        out = await run(LaneExecutor(lanes), p)
        assert out["h"].status is LaneStatus.FALLBACK
        assert out["h"].fallback_for == "h"
        assert "served by fallback 'b'" in (out["h"].error or "")
        assert out["h"].hits
        assert lanes["b"].calls == 1

    async def test_reserve_is_capped_at_a_quarter_of_the_budget(self) -> None:
        """A reserve larger than a quarter of the budget does not starve the lane's own call."""
        lanes = {"s": FakeLane(name="s", delay_ms=60), "b": FakeLane(name="b")}
        p = [PlannedLane(name="s", budget_ms=400, fallback="b", fallback_reserve_ms=1000)]
        out = await run(LaneExecutor(lanes), p)
        assert out["s"].status is LaneStatus.SUCCESS
        assert lanes["b"].calls == 0

    async def test_suspended_lane_uses_fallback(self) -> None:
        """A suspended provider's lane is served by its fallback."""
        pen = ProviderPenalties()
        pen.record_failure("pa", "rate_limited")
        lanes = {"a": FakeLane(name="a", provider="pa"), "b": FakeLane(name="b", provider="pb")}
        out = await run(LaneExecutor(lanes, penalties=pen), plan("a", fallback={"a": "b"}))
        assert out["a"].status is LaneStatus.FALLBACK
        assert lanes["a"].calls == 0


class TestRetriesAndPenalties:
    async def test_unavailable_is_retried(self) -> None:
        """LaneUnavailable is retried within budget and the retry succeeds."""
        lane = FlakyLane(1, name="f")
        out = await run(LaneExecutor({"f": lane}), plan("f"))
        assert out["f"].status is LaneStatus.SUCCESS
        assert lane.calls == 2

    async def test_rejected_is_never_retried(self) -> None:
        """LaneRejected is not retried and suspends the provider with its Retry-After."""
        lane = FakeLane(name="r", provider="pr", error=LaneRejected("429", suspend_s=30.0))
        ex = LaneExecutor({"r": lane})
        out = await run(ex, plan("r"))
        assert out["r"].status is LaneStatus.ERROR
        assert lane.calls == 1
        assert ex.penalties.snapshot("pr")["suspended_for_s"] > 25

    async def test_retry_budget_exhausted_stops_retries(self) -> None:
        """With the retry budget spent, LaneUnavailable is not retried."""
        pen = ProviderPenalties(PenaltyConfig(retry_budget_ratio=0.0))
        pen.try_acquire_retry("fake")
        lane = FlakyLane(1, name="f")
        out = await run(LaneExecutor({"f": lane}, penalties=pen), plan("f"))
        assert out["f"].status is LaneStatus.ERROR
        assert lane.calls == 1

    async def test_retries_capped_by_retry_budget(self) -> None:
        """A provider that keeps failing gets one retry from its budget, not max_attempts."""
        lane = FlakyLane(100, name="f")
        out = await run(LaneExecutor({"f": lane}, max_attempts=10), plan("f"))
        assert out["f"].status is LaneStatus.ERROR
        assert lane.calls == 2

    async def test_suspended_provider_is_skipped_without_a_call(self) -> None:
        """A suspended provider is not called and reported as suspended."""
        pen = ProviderPenalties()
        pen.record_failure("pa", "forbidden")
        lane = FakeLane(name="a", provider="pa")
        out = await run(LaneExecutor({"a": lane}, penalties=pen), plan("a"))
        assert out["a"].status is LaneStatus.SUSPENDED
        assert lane.calls == 0

    async def test_suspended_lane_is_decided_without_a_task(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A suspended lane with no fallback is answered on the spot (no task), its neighbours run as usual, and a
        lane that falls back to it sees it as failed."""
        pen = ProviderPenalties()
        pen.record_failure("pa", "forbidden")
        lanes = {"a": FakeLane(name="a", provider="pa"), "b": FakeLane(name="b", provider="pb"),
                 "c": FakeLane(name="c", provider="pc", error=RuntimeError("down"))}  # fmt: skip
        ex = LaneExecutor(lanes, penalties=pen)
        started: list[str] = []
        real = ex._run_lane

        async def tracked(p: PlannedLane, *args: object) -> LaneOutcome:
            started.append(p.name)
            return await real(p, *args)  # type: ignore[arg-type]

        monkeypatch.setattr(ex, "_run_lane", tracked)
        out = await run(ex, plan("a", "b", "c", fallback={"c": "a"}))
        assert list(out) == ["a", "b", "c"]
        assert started == ["b", "c"]
        assert out["a"].status is LaneStatus.SUSPENDED
        assert "forbidden" in (out["a"].error or "")
        assert out["a"].provider == "pa"
        assert out["b"].status is LaneStatus.SUCCESS
        assert out["c"].status is LaneStatus.ERROR  # its fallback target is suspended
        assert lanes["a"].calls == 0

    async def test_penalised_provider_is_down_weighted(self) -> None:
        """A provider with a poor record gets a reduced fusion weight."""
        pen = ProviderPenalties(PenaltyConfig(failure_rate_suspend=0.9))
        for _ in range(3):
            pen.record_success("pa", 1.0)
        for _ in range(2):
            pen.record_failure("pa", "bad_response")
        out = await run(LaneExecutor({"a": FakeLane(name="a", provider="pa")}, penalties=pen), plan("a"))
        assert out["a"].status is LaneStatus.SUCCESS
        assert out["a"].weight < 1.0

    def test_invalid_arguments_rejected(self) -> None:
        """Nonsensical executor settings are programmer errors."""
        with pytest.raises(ValueError, match="max_attempts"):
            LaneExecutor({}, max_attempts=0)


class TestWebCache:
    async def test_successful_web_call_is_cached(self) -> None:
        """The executor writes a web-kind lane's answer to the web cache; other kinds are not written."""
        cache = WebCache()
        lanes = {
            "web": FakeLane(name="web", kind=LaneKind.WEB, provider="searxng", hits=2),
            "kw": FakeLane(name="kw", hits=2),
        }
        out = await run(LaneExecutor(lanes, web_cache=cache), plan("web", "kw"))
        entries = cache.lookup("Q")
        assert [(e.provider, e.hits) for e in entries] == [("searxng", out["web"].hits)]

    async def test_failed_web_lane_is_served_from_the_cache(self) -> None:
        """After one success, a failing web lane's ``web_cache`` fallback serves the cached hits (not re-cached)."""
        cache = WebCache()
        resources = LaneResources(web_cache=cache)
        fallback = CachedWebLane(LaneSpec(name="web_cache", kind=LaneKind.WEB, backend="web_cache"), resources)
        live = FakeLane(name="web", kind=LaneKind.WEB, provider="searxng", hits=2)
        ex = LaneExecutor({"web": live, "web_cache": fallback}, web_cache=cache)
        await run(ex, plan("web", fallback={"web": "web_cache"}))
        live.error = LaneUnavailable("down", provider="searxng")
        ex.max_attempts = 1
        out = await run(ex, plan("web", fallback={"web": "web_cache"}))
        assert out["web"].status is LaneStatus.FALLBACK
        served = [(h.id, h.metadata["cached_from"]) for h in out["web"].hits]
        assert served == [("web-0", "searxng"), ("web-1", "searxng")]
        assert [e.provider for e in cache.lookup("q")] == ["searxng"]

    async def test_without_a_cache_nothing_is_written(self) -> None:
        """An executor without a cache runs web lanes as usual."""
        lanes = {"web": FakeLane(name="web", kind=LaneKind.WEB, hits=1)}
        out = await run(LaneExecutor(lanes), plan("web"))
        assert out["web"].status is LaneStatus.SUCCESS


class RecordingLane(FakeLane):
    """A fake lane that remembers the ``top_k`` it was asked for."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.asked: list[int] = []

    async def search(self, request: LaneRequest) -> list[Hit]:
        self.asked.append(request.top_k)
        return await super().search(request)


class TestSourcesOverFetch:
    async def test_filtered_hits_are_made_up_from_deeper(self) -> None:
        """Under ``sources = academic`` a store lane whose every other hit is dropped is asked for 3 × top_k and
        still fills top_k with kept hits, re-ranked 1..top_k."""
        hits = [
            Hit(
                id=f"h{i}",
                rank=i + 1,
                score=1.0 / (i + 1),
                source_kind=SourceKind.OPERATOR if i % 2 else SourceKind.IMPORT,
            )
            for i in range(30)
        ]
        lane = RecordingLane(name="vec", kind=LaneKind.VECTOR, hits=hits)
        request = LaneRequest(
            query="q", top_k=5, constraints=BoundConstraints(source_filter=SOURCE_FILTERS["academic"])
        )
        loop = asyncio.get_running_loop()
        out = await LaneExecutor({"vec": lane}).run(plan("vec"), request, deadline=loop.time() + 5.0)
        assert lane.asked == [15]
        assert [(h.id, h.rank) for h in out["vec"].hits] == [(f"h{2 * i}", i + 1) for i in range(5)]

    async def test_without_a_filter_the_lane_is_asked_as_planned(self) -> None:
        """No ``sources`` filter: top_k unchanged and the lane's answer untouched."""
        lane = RecordingLane(name="vec", kind=LaneKind.VECTOR, hits=30)
        out = await run(LaneExecutor({"vec": lane}), plan("vec"))
        assert lane.asked == [REQ.top_k]
        assert len(out["vec"].hits) == REQ.top_k


class ThreadLane(BaseLane):
    """A local store in miniature: each search runs ``work`` in a worker thread (cancellable while queued)."""

    provider = "local_store"

    def __init__(self, work: object) -> None:
        super().__init__(LaneSpec(name="local", kind=LaneKind.KEYWORD, backend="fake"), LaneResources())
        self.work = work

    async def search(self, request: LaneRequest) -> list[Hit]:
        await asyncio.to_thread(self.work)  # type: ignore[arg-type]
        return synthetic_hits(self.name, 3)


class TestQueueTimeIsNotCharged:
    async def test_timeouts_spent_waiting_for_a_thread_never_suspend_the_store(self) -> None:
        """Calls cut while their job waits for a busy worker are timeouts, yet the store's health stays clean."""
        from fabric.core.lanepool import LanePool

        loop = asyncio.get_running_loop()
        loop.set_default_executor(LanePool(max_workers=1))
        release = threading.Event()
        blocker = asyncio.ensure_future(asyncio.to_thread(release.wait, 30.0))  # holds the only worker
        metrics = EngineMetrics()
        penalties = ProviderPenalties(PenaltyConfig(min_samples=2, failure_rate_suspend=0.5))
        ex = LaneExecutor({"local": ThreadLane(lambda: None)}, penalties=penalties, metrics=metrics)
        try:
            outs = [await run(ex, plan("local", budget_ms=30)) for _ in range(6)]
        finally:
            release.set()
            await blocker
        assert {o["local"].status for o in outs} == {LaneStatus.TIMEOUT}
        assert "not charged" in (outs[0]["local"].error or "")
        health = penalties.snapshot("local_store")
        assert (health["state"], health["samples"]) == ("closed", 0)
        assert metrics.uncharged_timeouts.labels("local_store")._value.get() == 6
        assert (await run(ex, plan("local")))["local"].status is LaneStatus.SUCCESS

    async def test_a_store_slow_in_its_own_thread_is_charged(self) -> None:
        """A call whose own job runs past the cut is the store's timeout, recorded in its health."""
        from fabric.core.lanepool import LanePool

        asyncio.get_running_loop().set_default_executor(LanePool(max_workers=4))
        await asyncio.to_thread(lambda: None)  # a worker thread exists before the timed call
        slow = threading.Event()
        penalties = ProviderPenalties()
        ex = LaneExecutor({"local": ThreadLane(lambda: slow.wait(5.0))}, penalties=penalties)
        try:
            out = await run(ex, plan("local", budget_ms=300))
        finally:
            slow.set()
        assert out["local"].status is LaneStatus.TIMEOUT
        health = penalties.snapshot("local_store")
        assert (health["samples"], health["timeout_rate"]) == (1, 1.0)


def _scored(prefix: str, scores: list[float]) -> list[Hit]:
    return [
        Hit(id=f"{prefix}-{i}", rank=i + 1, score=s, title=f"{prefix} {i}", text=f"text {prefix} {i}")
        for i, s in enumerate(scores)
    ]


class TestConfidence:
    """The weight of a lane whose kind is calibrated follows its top score (``[fusion.confidence]``)."""

    CAL: ClassVar = {LaneKind.VECTOR: LaneConfidence(reference=0.62, slope=2.0, min=0.25, max=1.5)}

    async def test_weak_top_score_lowers_the_weight(self) -> None:
        """A vector lane whose best cosine is 0.47 counts 0.7 of its configured weight, and says so."""
        lane = FakeLane(name="v", kind=LaneKind.VECTOR, hits=_scored("v", [0.47, 0.40]))
        ex = LaneExecutor({"v": lane}, confidence=self.CAL)
        out = await run(ex, [PlannedLane(name="v", budget_ms=1000, weight=0.5)])
        assert out["v"].confidence == pytest.approx(0.7)
        assert out["v"].weight == pytest.approx(0.35)
        assert out["v"].to_dict()["confidence"] == pytest.approx(0.7)

    async def test_strong_top_score_raises_it_up_to_max(self) -> None:
        """A close match counts more, never more than ``max`` times the configured weight."""
        lane = FakeLane(name="v", kind=LaneKind.VECTOR, hits=_scored("v", [0.95, 0.9]))
        ex = LaneExecutor({"v": lane}, confidence=self.CAL)
        out = await run(ex, [PlannedLane(name="v", budget_ms=1000, weight=1.0)])
        assert out["v"].weight == pytest.approx(1.5)

    async def test_uncalibrated_kind_keeps_its_weight(self) -> None:
        """A keyword lane's BM25 scores have no absolute scale: its weight is the configured one."""
        lane = FakeLane(name="k", kind=LaneKind.KEYWORD, hits=_scored("k", [0.1, 0.05]))
        ex = LaneExecutor({"k": lane}, confidence=self.CAL)
        out = await run(ex, [PlannedLane(name="k", budget_ms=1000, weight=1.0)])
        assert (out["k"].weight, out["k"].confidence) == (1.0, 1.0)

    async def test_fallback_hits_are_judged_by_their_own_lane(self) -> None:
        """When the vector lane fails and the keyword lane stands in, its BM25 scores are not read as cosines."""
        lanes = {
            "v": FakeLane(name="v", kind=LaneKind.VECTOR, error=LaneUnavailable("down", provider="fake")),
            "k": FakeLane(name="k", kind=LaneKind.KEYWORD, hits=_scored("k", [0.1, 0.05])),
        }
        ex = LaneExecutor(lanes, confidence=self.CAL, max_attempts=1)
        out = await run(ex, [PlannedLane(name="v", budget_ms=1000, weight=1.0, fallback="k")])
        assert out["v"].status is LaneStatus.FALLBACK
        assert (out["v"].weight, out["v"].confidence) == (1.0, 1.0)

    async def test_no_hits_no_factor(self) -> None:
        """An empty answer has no top score: factor 1."""
        lane = FakeLane(name="v", kind=LaneKind.VECTOR, hits=[])
        ex = LaneExecutor({"v": lane}, confidence=self.CAL)
        out = await run(ex, [PlannedLane(name="v", budget_ms=1000, weight=1.0)])
        assert out["v"].confidence == 1.0
