"""Tests for fabric.query.stages.run_stage2 on a real executor with fake lanes: the gate, the cap, the record."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from fabric.core.models import LaneKind, LaneOutcome, LaneRequest, LaneStatus
from fabric.query.executor import LaneExecutor, PlannedLane, RunStats
from fabric.query.stages import run_stage2
from fabric.settings import FusionConfig, StageConfig
from fusion.pipeline import FusionContext
from lanes.fake import FakeLane, synthetic_hits

REQUEST = LaneRequest(query="q")
CTX = FusionContext(config=FusionConfig(), now=datetime(2026, 1, 1, tzinfo=UTC))


def stage1(hits: int) -> dict[str, LaneOutcome]:
    """One successful stage-1 outcome with ``hits`` distinct hits."""
    return {
        "s1": LaneOutcome(
            lane="s1", kind=LaneKind.KEYWORD, provider="p1", status=LaneStatus.SUCCESS,
            hits=tuple(synthetic_hits("s1", hits)),
        )
    }  # fmt: skip


async def run(outcomes: dict[str, LaneOutcome], executor: LaneExecutor, **config: float) -> tuple[dict, set[str]]:
    by_design: set[str] = set()
    deadline = asyncio.get_running_loop().time() + 5.0
    info = await run_stage2(
        [PlannedLane(name="s2", budget_ms=2000.0, stage=2)],
        outcomes,
        REQUEST,
        deadline=deadline,
        ctx=CTX,
        executor=executor,
        config=StageConfig(**config),
        by_design=by_design,
        stats=RunStats(),
    )
    return info, by_design


class TestRunStage2:
    async def test_short_stage1_runs_stage2_and_adds_its_outcome(self) -> None:
        """Fewer than ``min_must_count`` items: stage 2 runs and its outcome joins the outcomes."""
        lane = FakeLane(name="s2", hits=4)
        outcomes = stage1(1)
        info, by_design = await run(outcomes, LaneExecutor({"s2": lane}), min_must_count=3)
        assert info["stage2_should_trigger"]
        assert info["stage2_used"]
        assert info["stage1_count"] == 1
        assert outcomes["s2"].status is LaneStatus.SUCCESS
        assert lane.calls == 1
        assert by_design == set()

    async def test_enough_stage1_items_skip_stage2_by_design(self) -> None:
        """Enough items: stage 2 is recorded as skipped (with the reason) and marked by design, not partial."""
        lane = FakeLane(name="s2", hits=4)
        outcomes = stage1(5)
        info, by_design = await run(outcomes, LaneExecutor({"s2": lane}), min_must_count=3)
        assert not info["stage2_should_trigger"]
        assert outcomes["s2"].status is LaneStatus.SKIPPED
        assert "stage 2 not triggered" in (outcomes["s2"].error or "")
        assert by_design == {"s2"}
        assert lane.calls == 0

    async def test_slow_provider_is_skipped_over_the_cap(self) -> None:
        """A provider whose observed p50 exceeds ``stage2_cap_ms`` is skipped and the record says so."""
        lane = FakeLane(name="s2", provider="slow", hits=4)
        executor = LaneExecutor({"s2": lane})
        executor.penalties.record_success("slow", 900.0)
        outcomes = stage1(0)
        info, by_design = await run(outcomes, executor, min_must_count=3, stage2_cap_ms=600.0)
        assert info["stage2_skipped_budget"]
        assert not info["stage2_used"]
        assert by_design == {"s2"}
        assert lane.calls == 0

    async def test_stage2_budget_is_cut_at_the_cap(self) -> None:
        """A stage-2 lane slower than ``stage2_cap_ms`` times out at the cap, not at its own budget."""
        lane = FakeLane(name="s2", hits=4, delay_ms=1000)
        outcomes = stage1(0)
        info, _ = await run(outcomes, LaneExecutor({"s2": lane}), min_must_count=3, stage2_cap_ms=50.0)
        assert info["stage2_used"]
        assert outcomes["s2"].status is LaneStatus.TIMEOUT


class TestStageHelpers:
    def test_stage_request_takes_the_smaller_budget(self) -> None:
        """N1 for stage 1, N2 for stage 2, never more than the request asked."""
        from fabric.query.stages import stage_request

        config = StageConfig(stage1_top_n=20, stage2_top_n=30)
        big = LaneRequest(query="q", top_k=50)
        assert stage_request(big, 1, config).top_k == 20
        assert stage_request(big, 2, config).top_k == 30
        small = LaneRequest(query="q", top_k=10)
        assert stage_request(small, 1, config) is small

    def test_outcome_of_each_record(self) -> None:
        """The gate's four outcomes, from the record's flags."""
        from fabric.query.stages import outcome_of

        base = {"stage2_should_trigger": True, "stage2_used": False, "stage2_skipped_budget": False}
        assert outcome_of({**base, "stage2_should_trigger": False}) == "not_triggered"
        assert outcome_of({**base, "stage2_used": True}) == "used"
        assert outcome_of({**base, "stage2_skipped_budget": True}) == "skipped_budget"
        assert outcome_of(base) == "skipped"

    async def test_record_names_the_outcome(self) -> None:
        """run_stage2 records its outcome with the flags."""
        lane = FakeLane(name="s2", hits=4)
        info, _ = await run(stage1(1), LaneExecutor({"s2": lane}), min_must_count=3)
        assert info["stage2_outcome"] == "used"
        info, _ = await run(stage1(5), LaneExecutor({"s2": lane}), min_must_count=3)
        assert info["stage2_outcome"] == "not_triggered"
