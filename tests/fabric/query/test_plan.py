"""Tests for fabric.query.plan: lane plans, the cursor fingerprint, the result built from a plan and its run."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from fabric.core.models import FusionMode, LaneKind, LaneOutcome, LaneStatus, PreflightResult, SearchRequest
from fabric.query.executor import PlannedLane
from fabric.query.plan import QueryPlan, QueryRun, build_result, plan_lanes, request_fingerprint
from fabric.settings import LaneConfig, ModeConfig
from fusion.pipeline import FusionContext, fuse
from lanes.fake import synthetic_hits
from tests.support.settings import make_settings

NOW = datetime(2026, 1, 1, tzinfo=UTC)
MODE = ModeConfig(total_budget_ms=1000.0, lanes={"a": 400.0, "b": 200.0})


def plan_of(*lanes: PlannedLane, offset: int = 0, fingerprint: str = "") -> QueryPlan:
    return QueryPlan(
        lanes=lanes, mode=MODE, multiplier=1.0, deadline=0.0, now=NOW, offset=offset, fingerprint=fingerprint
    )


def run_of(tmp_path: Path, outcomes: dict[str, LaneOutcome], **kw: object) -> QueryRun:
    ctx = FusionContext(config=make_settings(tmp_path).fusion, now=NOW)
    return QueryRun(
        preflight=PreflightResult(bypassed=True, refined_query="q"),
        outcomes=outcomes,
        fused=fuse(outcomes, ctx),
        stages={},
        **kw,
    )


def outcome(name: str, hits: int, status: LaneStatus = LaneStatus.SUCCESS) -> LaneOutcome:
    return LaneOutcome(
        lane=name, kind=LaneKind.KEYWORD, provider=name, status=status, hits=tuple(synthetic_hits(name, hits))
    )


class TestPlanLanes:
    def test_budget_weight_and_stage_come_from_the_lane_config(self) -> None:
        """Each lane gets the mode's budget for it, its weight and its stage."""
        configs = {"a": LaneConfig(name="a", kind=LaneKind.KEYWORD, backend="fake", weight=0.5, stage=2)}
        (lane,) = plan_lanes(["a"], configs, MODE, 1.0, {})
        assert (lane.name, lane.budget_ms, lane.weight, lane.stage) == ("a", 400.0, 0.5, 2)

    def test_cost_multiplier_scales_the_budget(self) -> None:
        """A cost multiplier scales each lane's budget."""
        configs = {"b": LaneConfig(name="b", kind=LaneKind.KEYWORD, backend="fake")}
        (lane,) = plan_lanes(["b"], configs, MODE, 0.5, {})
        assert lane.budget_ms == 100.0

    def test_fallback_only_when_available(self) -> None:
        """A configured fallback is planned only when that lane was built."""
        configs = {"a": LaneConfig(name="a", kind=LaneKind.WEB, backend="fake", fallback="cache")}
        assert plan_lanes(["a"], configs, MODE, 1.0, {})[0].fallback is None
        assert plan_lanes(["a"], configs, MODE, 1.0, {"cache": object()})[0].fallback == "cache"


class TestQueryPlan:
    def test_stages_split_the_planned_lanes(self) -> None:
        """``stage(n)`` keeps the planned order within each stage."""
        plan = plan_of(
            PlannedLane(name="a", budget_ms=1.0),
            PlannedLane(name="b", budget_ms=1.0, stage=2),
            PlannedLane(name="c", budget_ms=1.0),
        )
        assert [p.name for p in plan.stage(1)] == ["a", "c"]
        assert [p.name for p in plan.stage(2)] == ["b"]
        assert plan.names == ["a", "b", "c"]


class TestRequestFingerprint:
    def test_changes_with_the_lanes(self) -> None:
        """Another lane set is another query: its cursor must not be accepted."""
        req = SearchRequest(query="q")
        assert request_fingerprint(req, ["a"], FusionMode.RRF) != request_fingerprint(req, ["a", "b"], FusionMode.RRF)

    def test_ignores_the_cursor(self) -> None:
        """Every page of one query shares the fingerprint."""
        req = SearchRequest(query="q")
        assert request_fingerprint(req, ["a"], FusionMode.RRF) == request_fingerprint(
            replace(req, cursor="abc"), ["a"], FusionMode.RRF
        )


class TestBuildResult:
    def test_page_at_the_offset_with_a_next_cursor(self, tmp_path: Path) -> None:
        """The page starts at the plan's offset and the cursor points past it."""
        run = run_of(tmp_path, {"a": outcome("a", 8)})
        seen: list[tuple[int, str]] = []

        def cursor(end: int, fp: str) -> str:
            seen.append((end, fp))
            return f"c{end}"

        req = SearchRequest(query="q", top_k=3)
        res = build_result(
            req,
            plan_of(PlannedLane(name="a", budget_ms=1.0), offset=3, fingerprint="fp"),
            run,
            trace_id="t",
            started=time.perf_counter(),
            cursor=cursor,
            default_fusion=FusionMode.RRF,
        )
        assert [it.id for it in res.items] == [it.id for it in run.fused.items[3:6]]
        assert res.next_cursor == "c6"
        assert seen == [(6, "fp")]

    def test_last_page_has_no_cursor(self, tmp_path: Path) -> None:
        """No cursor when the page reaches the end of the fused list."""
        run = run_of(tmp_path, {"a": outcome("a", 2)})
        res = build_result(
            SearchRequest(query="q", top_k=5),
            plan_of(PlannedLane(name="a", budget_ms=1.0)),
            run,
            trace_id="t",
            started=time.perf_counter(),
            cursor=lambda end, fp: "never",
            default_fusion=FusionMode.RRF,
        )
        assert res.next_cursor is None

    def test_a_failed_lane_makes_it_partial_unless_by_design(self, tmp_path: Path) -> None:
        """A planned lane that did not succeed makes the result partial, a lane skipped by design does not."""
        outcomes = {"a": outcome("a", 2), "b": outcome("b", 0, LaneStatus.SKIPPED)}
        plan = plan_of(PlannedLane(name="a", budget_ms=1.0), PlannedLane(name="b", budget_ms=1.0, stage=2))
        common = {
            "trace_id": "t",
            "started": time.perf_counter(),
            "cursor": lambda end, fp: "",
            "default_fusion": FusionMode.RRF,
        }
        req = SearchRequest(query="q")
        assert build_result(req, plan, run_of(tmp_path, outcomes), **common).partial
        by_design = run_of(tmp_path, outcomes, by_design={"b"})
        assert not build_result(req, plan, by_design, **common).partial

    def test_overhead_excludes_the_time_waited_on_lanes(self, tmp_path: Path) -> None:
        """``overhead_ms`` is the total minus the lanes' wait."""
        run = run_of(tmp_path, {"a": outcome("a", 1)}, lanes_ms=5.0)
        started = time.perf_counter() - 0.050  # 50 ms ago
        res = build_result(
            SearchRequest(query="q"),
            plan_of(PlannedLane(name="a", budget_ms=1.0)),
            run,
            trace_id="t",
            started=started,
            cursor=lambda end, fp: "",
            default_fusion=FusionMode.RRF,
        )
        assert res.timings["overhead_ms"] == res.timings["total_ms"] - 5.0
