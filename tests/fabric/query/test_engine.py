"""Tests for the engine: the whole query path with fake lanes."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import structlog

from fabric.core.errors import LaneRejected, PartialResultError, QueryError
from fabric.core.models import Hit, LaneKind, LaneRequest, LaneStatus
from fabric.query.engine import CURSOR_SECRET_ENV, Engine
from fabric.query.validation import parse_request
from fabric.settings import PreflightConfig, StageConfig
from lanes.fake import FakeLane
from tests.fabric.query.test_executor import StubbornLane
from tests.support.settings import make_settings, quiet_logs  # noqa: F401


class RecordingLane(FakeLane):
    """Remembers the requests and the trace id it saw."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.requests: list[LaneRequest] = []
        self.trace_ids: list[str] = []

    async def search(self, request: LaneRequest) -> list[Hit]:
        self.requests.append(request)
        self.trace_ids.append(structlog.contextvars.get_contextvars().get("trace_id", ""))
        return await super().search(request)


async def search(engine: Engine, **data: Any):
    data.setdefault("query", "hello world")
    return await engine.search(parse_request(data, engine.settings))


class TestSearch:
    async def test_healthy_lanes_fused(self, tmp_path: Path) -> None:
        """Two healthy lanes give a full, non-partial answer with receipt and timings."""
        settings = make_settings(tmp_path)
        lanes = {"a": FakeLane(name="a", hits=5), "b": FakeLane(name="b", hits=5)}
        async with Engine(settings, lanes=lanes) as engine:
            res = await search(engine, top_k=10)
        assert not res.partial
        assert len(res.items) == 10
        assert {"total_ms", "fusion_ms", "preflight_ms", "overhead_ms"} <= set(res.timings)
        body = res.to_dict()
        assert body["lanes"]["a"]["status"] == "success"
        assert body["receipt"]["fused"]

    async def test_hung_and_raising_lanes_do_not_lose_healthy_hits(self, tmp_path: Path) -> None:
        """A lane ignoring cancellation and a raising lane leave the healthy lane's hits intact."""
        settings = make_settings(tmp_path, {"a": {}, "s": {}, "bad": {}}, total_ms=250, lane_ms=150)
        lanes = {
            "a": FakeLane(name="a", hits=5),
            "s": StubbornLane(name="s"),
            "bad": FakeLane(name="bad", error=ValueError("x")),
        }
        async with Engine(settings, lanes=lanes) as engine:
            res = await search(engine, top_k=10)
            abandoned = set(engine.executor.abandoned)
            assert abandoned
            assert not any(t.done() for t in abandoned)
        assert res.partial
        assert {it.id for it in res.items} == {f"a-{i}" for i in range(5)}
        assert res.lanes["s"].status is LaneStatus.TIMEOUT
        assert res.lanes["bad"].status is LaneStatus.ERROR

    async def test_strict_mode_refuses_partial(self, tmp_path: Path) -> None:
        """Strict mode turns a partial answer into PartialResultError."""
        settings = make_settings(tmp_path, {"a": {}, "bad": {}})
        lanes = {"a": FakeLane(name="a"), "bad": FakeLane(name="bad", error=RuntimeError("x"))}
        async with Engine(settings, lanes=lanes) as engine:
            with pytest.raises(PartialResultError, match="bad=error"):
                await search(engine, strict=True)

    async def test_strict_mode_passes_full_answer(self, tmp_path: Path) -> None:
        """Strict mode returns normally when every lane succeeded."""
        async with Engine(make_settings(tmp_path), lanes={"a": FakeLane(name="a"), "b": FakeLane(name="b")}) as e:
            assert not (await search(e, strict=True)).partial

    async def test_lane_subset(self, tmp_path: Path) -> None:
        """A request restricted to some lanes runs only those."""
        lanes = {"a": FakeLane(name="a"), "b": FakeLane(name="b")}
        async with Engine(make_settings(tmp_path), lanes=lanes) as engine:
            res = await search(engine, lanes=["b"])
        assert list(res.lanes) == ["b"]
        assert lanes["a"].calls == 0

    async def test_trace_id_reaches_lanes(self, tmp_path: Path) -> None:
        """Lane tasks inherit the query's trace_id."""
        lane = RecordingLane(name="a")
        async with Engine(make_settings(tmp_path, {"a": {}}), lanes={"a": lane}) as engine:
            res = await search(engine)
        assert lane.trace_ids == [res.trace_id]
        assert lane.requests[0].trace_id == res.trace_id

    async def test_preflight_output_bound_into_lane_request(self, tmp_path: Path) -> None:
        """Pre-flight refinement and extracted years reach the lanes as text and soft query years."""
        lane = RecordingLane(name="a")
        async with Engine(make_settings(tmp_path, {"a": {}}), lanes={"a": lane}) as engine:
            res = await search(
                engine, query='  Vaccine  "Side Effects" 2019-2021 site:nih.gov', constraints={"cost": "low"}
            )
        req = lane.requests[0]
        assert res.preflight.refined_query == req.query == "Vaccine Side Effects 2019-2021"
        assert (req.constraints.query_years, req.constraints.date_from) == ((2019, 2021), None)
        assert req.constraints.sites == ("nih.gov",)
        assert req.constraints.phrases == ("side effects",)
        assert req.constraints.max_results == 10
        assert req.top_k == 10

    async def test_preflight_bypass_recorded(self, tmp_path: Path) -> None:
        """A bypassed pre-flight passes the query unchanged and records why."""
        settings = make_settings(tmp_path, {"a": {}}, preflight=PreflightConfig(enabled=False))
        async with Engine(settings, lanes={"a": FakeLane(name="a")}) as engine:
            res = await search(engine, query="Hello  World")
        assert res.preflight.bypassed
        assert res.preflight.reason == "disabled"
        assert res.preflight.refined_query == "Hello  World"

    async def test_metrics_and_health(self, tmp_path: Path) -> None:
        """Metrics count lane outcomes and queries; health lists lanes with provider health."""
        lanes = {"a": FakeLane(name="a"), "b": FakeLane(name="b", provider="pb", error=RuntimeError("x"))}
        async with Engine(make_settings(tmp_path), lanes=lanes) as engine:
            await search(engine)
            summary = engine.metrics.summary()
            health = engine.health()
            text = engine.metrics.exposition().decode()
        assert summary["queries"] == 1
        assert summary["lane_success_rate"] == 0.5
        assert summary["partial_share"] == 1.0
        assert health["lanes"]["b"]["health"]["failure_rate"] == 1.0
        assert 'fabric_lane_outcomes_total{lane="b",status="error"} 1.0' in text


class TestBuild:
    async def test_unbuildable_lane_reported_as_error(self, tmp_path: Path) -> None:
        """A lane whose backend cannot be built is an error outcome, not an engine crash."""
        settings = make_settings(tmp_path, {"a": {"options": {"hits": 3}}, "b": {}})
        lanes_cfg = dict(settings.lanes)
        lanes_cfg["b"] = lanes_cfg["b"].__class__(name="b", kind=LaneKind.KEYWORD, backend="no_such_backend")
        settings = settings.__class__(**{**{f: getattr(settings, f) for f in settings.__slots__}, "lanes": lanes_cfg})
        async with Engine(settings) as engine:
            res = await search(engine)
            assert "b" in engine.health()["lanes"]
            assert not engine.health()["lanes"]["b"]["built"]
        assert res.lanes["a"].status is LaneStatus.SUCCESS
        assert len(res.items) == 3
        assert res.lanes["b"].status is LaneStatus.ERROR
        assert "no_such_backend" in (res.lanes["b"].error or "")

    async def test_disabled_lane_requested_is_reported(self, tmp_path: Path) -> None:
        """Asking for a lane disabled in configuration gives an error outcome that says so."""
        settings = make_settings(tmp_path, {"a": {}, "off": {"enabled": False}})
        async with Engine(settings) as engine:
            res = await search(engine, lanes=["a", "off"])
        assert res.lanes["off"].status is LaneStatus.ERROR
        assert "enabled = false" in (res.lanes["off"].error or "")
        assert res.lanes["a"].status is LaneStatus.SUCCESS

    async def test_stage_metadata_present_without_stage2_lanes(self, tmp_path: Path) -> None:
        """Stage keys are always reported, even with no stage-2 lanes configured."""
        async with Engine(make_settings(tmp_path, {"a": {}}), lanes={"a": FakeLane(name="a")}) as engine:
            res = await search(engine)
        assert res.stages["stage2_used"] is False
        assert res.stages["stage2_should_trigger"] is False

    async def test_search_before_open_is_programmer_error(self, tmp_path: Path) -> None:
        """search() before open() raises RuntimeError."""
        with pytest.raises(RuntimeError, match="open"):
            await Engine(make_settings(tmp_path)).search(parse_request({"query": "q"}, make_settings(tmp_path)))


class FlakyOpenLane(FakeLane):
    """Fails to open the first time, opens fine afterwards."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.opens = 0

    async def open(self) -> None:
        self.opens += 1
        if self.opens == 1:
            raise ConnectionError("not yet")


class TestWarmUp:
    async def test_lane_failing_to_open_is_retried_with_preflight(self, tmp_path: Path) -> None:
        """A lane whose open() failed at engine start is opened again during the next query's pre-flight."""
        lane = FlakyOpenLane(name="a")
        async with Engine(make_settings(tmp_path, {"a": {}}), lanes={"a": lane}) as engine:
            assert not engine.health()["lanes"]["a"]["opened"]
            res = await search(engine)
            assert engine.health()["lanes"]["a"]["opened"]
        assert lane.opens == 2
        assert res.lanes["a"].status is LaneStatus.SUCCESS


class TestPaging:
    async def test_pages_neither_repeat_nor_skip(self, tmp_path: Path) -> None:
        """Following next_cursor walks the whole fused list exactly once, in order."""
        lanes = {"a": FakeLane(name="a", hits=17), "b": FakeLane(name="b", hits=13)}
        async with Engine(make_settings(tmp_path), lanes=lanes) as engine:
            full = await search(engine, top_k=100)
            seen: list[str] = []
            cursor = None
            while True:
                page = await search(engine, top_k=7, **({"cursor": cursor} if cursor else {}))
                seen += [it.id for it in page.items]
                cursor = page.next_cursor
                if cursor is None:
                    break
        assert seen == [it.id for it in full.items]
        assert len(seen) == 30

    async def test_tampered_cursor_rejected(self, tmp_path: Path) -> None:
        """An altered cursor is a QueryError on the cursor field."""
        async with Engine(make_settings(tmp_path), lanes={"a": FakeLane(name="a", hits=20)}) as engine:
            page = await search(engine, top_k=5, lanes=["a"])
            assert page.next_cursor
            bad = page.next_cursor[:-2] + ("AA" if not page.next_cursor.endswith("AA") else "BB")
            with pytest.raises(QueryError) as info:
                await search(engine, top_k=5, lanes=["a"], cursor=bad)
        assert info.value.field == "cursor"

    async def test_foreign_cursor_rejected(self, tmp_path: Path) -> None:
        """A cursor from another query (or other page size) is refused."""
        async with Engine(make_settings(tmp_path), lanes={"a": FakeLane(name="a", hits=20)}) as engine:
            page = await search(engine, top_k=5, lanes=["a"])
            with pytest.raises(QueryError, match="different query"):
                await search(engine, query="other", top_k=5, lanes=["a"], cursor=page.next_cursor)
            with pytest.raises(QueryError):
                await search(engine, top_k=6, lanes=["a"], cursor=page.next_cursor)

    async def test_secret_from_env_shared_across_engines(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """With FABRIC_CURSOR_SECRET set, another engine accepts the cursor."""
        monkeypatch.setenv(CURSOR_SECRET_ENV, "shared")
        settings = make_settings(tmp_path / "one", {"a": {}})
        async with Engine(settings, lanes={"a": FakeLane(name="a", hits=20)}) as e1:
            cursor = (await search(e1, top_k=5)).next_cursor
        other = make_settings(tmp_path / "two", {"a": {}})
        async with Engine(other, lanes={"a": FakeLane(name="a", hits=20)}) as e2:
            assert next(it.id for it in (await search(e2, top_k=5, cursor=cursor)).items) == "a-5"

    async def test_secret_file_created_once_under_home(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without the env var a secret is created under the home and reused."""
        monkeypatch.delenv(CURSOR_SECRET_ENV, raising=False)
        settings = make_settings(tmp_path, {"a": {}})
        async with Engine(settings, lanes={"a": FakeLane(name="a")}):
            secret = (tmp_path / "cursor.secret").read_bytes()
        async with Engine(settings, lanes={"a": FakeLane(name="a")}):
            assert (tmp_path / "cursor.secret").read_bytes() == secret
            assert len(secret) == 64


class TestStages:
    def _settings(self, tmp_path: Path, **kw: Any):
        return make_settings(tmp_path, {"s1": {}, "s2": {"stage": 2}}, stages=StageConfig(min_must_count=3, **kw))

    async def test_stage2_runs_when_stage1_short(self, tmp_path: Path) -> None:
        """Stage 2 fills in when stage 1 yields fewer than min_must_count items."""
        lanes = {"s1": FakeLane(name="s1", hits=1), "s2": FakeLane(name="s2", hits=4)}
        async with Engine(self._settings(tmp_path), lanes=lanes) as engine:
            res = await search(engine)
        assert res.stages["stage2_should_trigger"]
        assert res.stages["stage2_used"]
        assert res.lanes["s2"].status is LaneStatus.SUCCESS
        assert len(res.items) == 5
        assert [it.stage_priority for it in res.items].count(1) == 4

    async def test_stage2_not_triggered_when_stage1_enough(self, tmp_path: Path) -> None:
        """Stage 2 is skipped (not partial) when stage 1 is enough."""
        lanes = {"s1": FakeLane(name="s1", hits=5), "s2": FakeLane(name="s2", hits=4)}
        async with Engine(self._settings(tmp_path), lanes=lanes) as engine:
            res = await search(engine)
        assert not res.stages["stage2_should_trigger"]
        assert not res.stages["stage2_used"]
        assert res.stages["stage2_outcome"] == "not_triggered"
        assert res.lanes["s2"].status is LaneStatus.SKIPPED
        assert lanes["s2"].calls == 0
        assert not res.partial

    async def test_stage2_lane_used_as_fallback_is_not_run_twice(self, tmp_path: Path) -> None:
        """A stage-2 lane that already served as a fallback in stage 1 is not run again."""
        settings = make_settings(
            tmp_path, {"s1": {"fallback": "s2"}, "s2": {"stage": 2}}, stages=StageConfig(min_must_count=50)
        )
        lanes = {"s1": FakeLane(name="s1", error=RuntimeError("x")), "s2": FakeLane(name="s2", provider="p2", hits=4)}
        async with Engine(settings, lanes=lanes) as engine:
            res = await search(engine)
        assert res.lanes["s1"].status is LaneStatus.FALLBACK
        assert res.lanes["s2"].status is LaneStatus.SKIPPED
        assert lanes["s2"].calls == 1
        assert len(res.items) == 4

    async def test_stage2_skipped_when_observed_latency_over_cap(self, tmp_path: Path) -> None:
        """A stage-2 provider whose observed p50 exceeds stage2_cap_ms is skipped and recorded."""
        lanes = {"s1": FakeLane(name="s1", hits=1), "s2": FakeLane(name="s2", provider="slow", hits=4)}
        async with Engine(self._settings(tmp_path, stage2_cap_ms=600), lanes=lanes) as engine:
            engine.penalties.record_success("slow", 900.0)
            res = await search(engine)
        assert res.stages["stage2_should_trigger"]
        assert res.stages["stage2_skipped_budget"]
        assert res.stages["stage2_outcome"] == "skipped_budget"
        assert not res.stages["stage2_used"]
        assert lanes["s2"].calls == 0

    async def test_stage_budgets_n1_n2_only_when_staged(self, tmp_path: Path) -> None:
        """Staged: stage-1 lanes are asked N1 hits, stage-2 lanes N2; unstaged lanes keep engine.lane_top_k."""
        staged = {"s1": RecordingLane(name="s1", hits=1), "s2": RecordingLane(name="s2", hits=40)}
        async with Engine(self._settings(tmp_path, stage1_top_n=15, stage2_top_n=25), lanes=staged) as engine:
            res = await search(engine, top_k=50)
        assert (staged["s1"].requests[0].top_k, staged["s2"].requests[0].top_k) == (15, 25)
        assert res.stages["stage2_outcome"] == "used"
        flat = {"a": RecordingLane(name="a", hits=1)}
        async with Engine(make_settings(tmp_path, {"a": {}}), lanes=flat) as engine:
            res = await search(engine, top_k=50)
        assert flat["a"].requests[0].top_k == engine.settings.engine.lane_top_k
        assert res.stages["stage2_outcome"] == "no_stage2_lanes"

    async def test_at_most_max_appended_stage2_items(self, tmp_path: Path) -> None:
        """Stage 2 returns 20 items; only the best max_appended (10) of them reach the answer, after stage 1's."""
        lanes = {"s1": FakeLane(name="s1", hits=2), "s2": FakeLane(name="s2", hits=40)}
        async with Engine(self._settings(tmp_path, max_appended=10), lanes=lanes) as engine:
            res = await search(engine, top_k=50, fusion="append_fill")
        assert len(res.lanes["s2"].hits) == 20
        assert [it.stage_priority for it in res.items] == [0, 0] + [1] * 10
        assert [it.id for it in res.items[2:]] == [f"s2-{i}" for i in range(10)]
        assert res.stages["stage2_appended"] == 10
        assert res.total == 12


class TestPenaltiesInEngine:
    async def test_retry_after_probe_and_reset(self, tmp_path: Path) -> None:
        """A 429 suspends for its Retry-After, a probe runs after it, and success resets the provider."""
        now = [0.0]
        lane = FakeLane(name="r", provider="pr", error=LaneRejected("429", suspend_s=30.0))
        settings = make_settings(tmp_path, {"a": {}, "r": {}})
        async with Engine(settings, lanes={"a": FakeLane(name="a"), "r": lane}, clock=lambda: now[0]) as engine:
            first = await search(engine)
            second = await search(engine)
            now[0] = 29.0
            third = await search(engine)
            now[0] = 31.0
            lane.error = None
            fourth = await search(engine)
        assert first.lanes["r"].status is LaneStatus.ERROR
        assert second.lanes["r"].status is LaneStatus.SUSPENDED
        assert third.lanes["r"].status is LaneStatus.SUSPENDED
        assert lane.calls == 2
        assert fourth.lanes["r"].status is LaneStatus.SUCCESS
        assert fourth.lanes["r"].health["state"] == "closed"
        assert second.lanes["a"].status is LaneStatus.SUCCESS

    async def test_configured_fallback_marked_in_result(self, tmp_path: Path) -> None:
        """A failing lane's configured fallback answers under its name, marked fallback, hits fused."""
        settings = make_settings(tmp_path, {"vec": {"fallback": "kw"}, "kw": {"enabled": False}})
        lanes = {
            "vec": FakeLane(name="vec", error=RuntimeError("down")),
            "kw": FakeLane(name="kw", provider="k", hits=3),
        }
        async with Engine(settings, lanes=lanes) as engine:
            res = await search(engine)
        out = res.lanes["vec"]
        assert out.status is LaneStatus.FALLBACK
        assert out.fallback_for == "vec"
        assert out.provider == "k"
        assert "kw" not in res.lanes
        assert {it.id for it in res.items} == {"kw-0", "kw-1", "kw-2"}
        assert res.partial

    async def test_cost_low_halves_lane_budgets(self, tmp_path: Path) -> None:
        """cost=low halves lane budgets: a lane answering in 750 ms of a 1000 ms budget is cut at 500 ms."""
        settings = make_settings(tmp_path, {"slow": {}}, total_ms=5000, lane_ms=1000)
        async with Engine(settings, lanes={"slow": FakeLane(name="slow", delay_ms=750)}) as engine:
            res = await search(engine, constraints={"cost": "low"})
        assert res.lanes["slow"].status is LaneStatus.TIMEOUT


class WarmEmbedder:
    """Counts warm() calls."""

    name = "fake"
    dim = 2

    def __init__(self) -> None:
        self.warmed = 0

    def warm(self) -> None:
        self.warmed += 1

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]


class TestEmbedderWarmUp:
    async def test_engine_open_warms_the_embedder(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """The embedder's model is loaded at open, not inside the first query's vector budget."""
        from lanes.base import LaneResources

        embedder = WarmEmbedder()

        async def fake_open(settings: Any, *, embedder_wanted: bool = True, **_: Any) -> LaneResources:
            return LaneResources(home=tmp_path, embedder=embedder)

        monkeypatch.setattr("fabric.query.engine.open_resources", fake_open)
        async with Engine(make_settings(tmp_path, {"a": {}})):
            assert embedder.warmed == 1


class TestSearchLog:
    async def test_search_finished_logged_at_debug_only(self, tmp_path: Path) -> None:
        """The per-query debug event is written when DEBUG is on, and skipped (not built) above it."""
        import io
        import json

        from fabric.core.logs import configure_logging

        for level, expected in (("DEBUG", True), ("WARNING", False)):
            stream = io.StringIO()
            configure_logging(level=level, stream=stream)
            try:
                async with Engine(make_settings(tmp_path), lanes={"a": FakeLane(name="a", hits=2)}) as engine:
                    await search(engine)
            finally:
                configure_logging(level="CRITICAL")
            events = [json.loads(line)["event"] for line in stream.getvalue().splitlines() if line.strip()]
            assert ("search_finished" in events) is expected


class TestPlan:
    async def test_plan_lists_the_enabled_lanes_with_their_budgets(self, tmp_path: Path) -> None:
        """The plan names each lane with the mode's budget for it, and a deadline within the total budget."""
        settings = make_settings(tmp_path, {"a": {}, "b": {}}, total_ms=500, budgets={"a": 300.0, "b": 100.0})
        lanes = {"a": FakeLane(name="a"), "b": FakeLane(name="b")}
        async with Engine(settings, lanes=lanes) as engine:
            before = asyncio.get_running_loop().time()
            plan = engine.plan(parse_request({"query": "q"}, settings))
        assert {p.name: p.budget_ms for p in plan.lanes} == {"a": 300.0, "b": 100.0}
        assert before < plan.deadline <= before + 0.5 + 0.05
        assert plan.offset == 0

    async def test_a_narrowed_plan_runs_only_its_lanes(self, tmp_path: Path) -> None:
        """What a router would do: drop a lane from the plan; the run and the result follow the plan."""
        settings = make_settings(tmp_path)
        lanes = {"a": FakeLane(name="a", hits=3), "b": FakeLane(name="b", hits=3)}
        async with Engine(settings, lanes=lanes) as engine:
            request = parse_request({"query": "q"}, settings)
            plan = engine.plan(request)
            narrowed = replace(plan, lanes=tuple(p for p in plan.lanes if p.name == "a"))
            run = await engine.run(request, narrowed, "trace")
        assert set(run.outcomes) == {"a"}
        assert {it.id for it in run.fused.items} == {"a-0", "a-1", "a-2"}


def _hit(hid: str, rank: int, **kw: Any) -> Hit:
    kw.setdefault("text", f"passage {hid} about vitamin d and bone fractures.")
    return Hit(id=hid, rank=rank, score=1.0 / rank, title=hid, **kw)


def _source_lanes() -> dict[str, FakeLane]:
    """A web lane (academic, encyclopedia and news domains), a store (imported and operator chunks), a feed."""
    from fabric.core.models import SourceKind

    web = [
        _hit("w-edu", 1, url="https://mit.edu/a", domain="mit.edu", source_kind=SourceKind.WEB),
        _hit("w-wiki", 2, url="https://en.wikipedia.org/b", domain="en.wikipedia.org", source_kind=SourceKind.WEB),
        _hit("w-news", 3, url="https://www.reuters.com/c", domain="reuters.com", source_kind=SourceKind.WEB),
    ]
    store = [
        _hit("s-import", 1, url="doc:paper/1", source_kind=SourceKind.IMPORT),
        _hit("s-operator", 2, url="doc:notes/1", source_kind=SourceKind.OPERATOR),
    ]
    feed = [_hit("f-item", 1, url="https://blog.example.org/f", domain="blog.example.org", source_kind=SourceKind.WEB)]
    return {
        "web": FakeLane(name="web", kind=LaneKind.WEB, hits=web),
        "store": FakeLane(name="store", kind=LaneKind.KEYWORD, hits=store),
        "feed": FakeLane(name="feed", kind=LaneKind.NEWS, hits=feed),
    }


class TestConstraintsAct:
    """sources, citations_required and cost change the answer, through the whole engine."""

    async def test_sources_keep_only_those_sources(self, tmp_path: Path) -> None:
        """academic keeps academic domains and imported corpora; news keeps news domains and feeds; both: all."""
        settings = make_settings(tmp_path, {"web": {}, "store": {}, "feed": {}})
        async with Engine(settings, lanes=_source_lanes()) as engine:
            every = await search(engine, constraints={"sources": "both"})
            academic = await search(engine, constraints={"sources": "academic"})
            news = await search(engine, constraints={"sources": "news"})
        assert {it.id for it in every.items} == {"w-edu", "w-wiki", "w-news", "s-import", "s-operator", "f-item"}
        assert {it.id for it in academic.items} == {"w-edu", "s-import"}
        assert {it.id for it in news.items} == {"w-news", "f-item"}
        assert academic.lanes["web"].hits[0].rank == 1
        assert len(academic.lanes["web"].hits) == 1

    async def test_citations_required_marks_items_without_a_passage(self, tmp_path: Path) -> None:
        """Each item gets its citation-ready passage and a marker; one without a reference is marked uncited."""
        hits = [
            _hit("a", 1, url="https://mit.edu/a", text="Bread is baked. Vitamin D lowers fracture risk."),
            _hit("b", 2, text="Vitamin D and fractures, with nothing to cite it by."),
            _hit("c", 3, url="doc:paper/3", text="Fracture risk and vitamin D in adults."),
        ]
        settings = make_settings(tmp_path, {"k": {}})
        async with Engine(settings, lanes={"k": FakeLane(name="k", hits=hits)}) as engine:
            plain = await search(engine, query="vitamin D fracture risk")
            cited = await search(engine, query="vitamin D fracture risk", constraints={"citations_required": True})
        assert [it.id for it in cited.items] == [it.id for it in plain.items] == ["a", "b", "c"]
        body = cited.to_dict()
        by_id = {it["id"]: it for it in body["items"]}
        assert by_id["a"]["citation"]["passage"] == "Vitamin D lowers fracture risk."
        assert (by_id["a"]["citation"]["marker"], by_id["c"]["citation"]["marker"]) == (1, 2)
        assert by_id["b"]["citation"] is None
        assert body["citations"] == {"required": True, "citable": 2, "uncited": ["b"]}
        assert "citation" not in plain.to_dict()["items"][0]
        assert plain.to_dict()["citations"] == {"required": False}

    async def test_cost_token_budget_bounds_the_returned_text(self, tmp_path: Path) -> None:
        """cost=low returns at most 1000 tokens of title and text; the next page starts at the first item left."""
        from fabric.query.answer_limits import count_tokens

        def text(n: int) -> str:  # 299 distinct tokens (+ a 1-token title): nothing is a duplicate
            return " ".join(f"d{n}w{i}" for i in range(299))

        hits = [_hit(f"h{n}", n + 1, text=text(n)) for n in range(8)]
        settings = make_settings(tmp_path, {"k": {}})
        async with Engine(settings, lanes={"k": FakeLane(name="k", hits=hits)}) as engine:
            free = await search(engine, top_k=5)
            low = await search(engine, top_k=5, constraints={"cost": "low"})
            assert low.next_cursor is not None
            second = await search(engine, top_k=5, constraints={"cost": "low"}, cursor=low.next_cursor)
        assert len(free.items) == 5
        assert free.budget == {}
        assert [it.id for it in low.items] == ["h0", "h1", "h2", "h3"]
        assert sum(count_tokens(it.hit.title) + count_tokens(it.hit.text) for it in low.items) == 1000
        assert low.budget == {"max_tokens": 1000, "tokens": 1000, "truncated": ["h3"], "deferred": 1}
        assert low.to_dict()["items"][3]["truncated"] is True
        assert [it.id for it in second.items] == ["h4", "h5", "h6", "h7"]

    async def test_sources_over_the_embedded_stores(self, tmp_path: Path) -> None:
        """Real SQLite FTS5, vector and graph stores: sources=academic keeps the imported entries only."""
        from fabric.serve.service import ingest_tasks
        from fabric.serve.tasks.submission import parse_submission
        from tests.support.ingested import engine as stores_engine

        entries = [
            {"id": "paper", "title": "vitamin d trial", "text": "Vitamin D lowers fracture risk in older adults."},
            {
                "id": "article",
                "title": "vitamin d news",
                "text": "Vitamin D pills and fracture risk, a report.",
                "url": "https://www.example.com/vitamin-d",
                "source_kind": "web",
            },
        ]
        eng = stores_engine(tmp_path / "home")
        tasks = ingest_tasks(eng)
        await eng.open()
        await tasks.start()
        try:
            task, _ = await tasks.submit(parse_submission({"entries": entries}, eng.settings.ingest, None))
            await task.done.wait()
            assert task.error is None
            every = await search(eng, query="vitamin d fracture risk")
            academic = await search(eng, query="vitamin d fracture risk", constraints={"sources": "academic"})
        finally:
            await tasks.aclose()
            await eng.aclose()
        assert {it.hit.doc_id for it in every.items} == {"paper", "article"}
        assert {it.hit.doc_id for it in academic.items} == {"paper"}
        assert all(h.doc_id == "paper" for o in academic.lanes.values() for h in o.hits)
