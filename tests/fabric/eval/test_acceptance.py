"""The staged-retrieval policy's acceptance verdict (seed 000 §6) in the eval report of every run with stage-2 lanes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fabric.eval import acceptance
from fabric.eval.acceptance import acceptance_lines, staged_acceptance
from fabric.eval.dataset import load_dataset
from fabric.eval.harness import EvalPlan, run_plan
from fabric.eval.report import build_artifact, render_markdown
from tests.fabric.eval.fake_engine import FakeEngine

TINY = Path(__file__).resolve().parents[2] / "fixtures" / "beir_tiny"
STAGED = {"stages": {"p95_target_ms": 1500.0, "stage2_lanes": ["vector_lance"]}}


def metrics(p95: float, fused: float, arm: float | None) -> dict[str, Any]:
    lanes = {"keyword": {"recall_at_10": 0.9}}
    if arm is not None:
        lanes["vector_lance"] = {"recall_at_10": arm}
    return {"fused": {"latency_p95_ms": p95, "recall_at_10": fused}, "lanes": lanes}


def test_public_api() -> None:
    assert sorted(acceptance.__all__) == ["RECALL_METRIC", "acceptance_lines", "staged_acceptance"]


@pytest.mark.parametrize(
    ("p95", "fused", "arm", "passed"),
    [
        (1200.0, 0.80, 0.75, True),  # both hold
        (1500.0, 0.75, 0.75, True),  # both at their limits: "<= 1500 ms", "not below"
        (1500.1, 0.80, 0.75, False),  # p95 over the target
        (900.0, 0.74, 0.75, False),  # recall below the LanceDB-only arm
        (900.0, 0.80, None, None),  # no stage-2-only pass: not measured
    ],
)
def test_verdict(p95: float, fused: float, arm: float | None, passed: bool | None) -> None:
    """PASS needs p95 <= 1500 ms and recall@10 >= the stage-2-only arm's; the difference is always reported."""
    v = staged_acceptance(STAGED, metrics(p95, fused, arm))
    assert v is not None
    assert v["passed"] is passed
    assert v["p95_passed"] is (p95 <= 1500.0)
    if arm is not None:
        assert v["recall_delta"] == pytest.approx(fused - arm)
        assert v["arm"] == "vector_lance"


def test_no_verdict_without_stage2_lanes() -> None:
    """A run with no stage-2 lane has no acceptance section."""
    assert staged_acceptance({"stages": {"stage2_lanes": []}}, metrics(10.0, 0.8, 0.7)) is None
    assert acceptance_lines(None) == []


def test_lines_carry_the_figures() -> None:
    lines = acceptance_lines(staged_acceptance(STAGED, metrics(1600.0, 0.70, 0.75)))
    assert lines[1] == "## Staged acceptance: FAIL"
    assert "- fused p95 1600.0 ms <= 1500 ms: FAIL" in lines
    assert lines[-1] == (
        "- recall_at_10 0.7000 >= the stage-2-only arm's (vector_lance: 0.7500; difference -0.0500): FAIL"
    )


async def test_every_staged_report_has_the_verdict() -> None:
    """An eval whose config names a stage-2 lane gets the section in the artifact and its Markdown; the arm is that
    lane's own pass."""
    dataset, engine = load_dataset(TINY, "test"), FakeEngine(TINY / "corpus.jsonl")
    passes, clock = await run_plan(engine, dataset, EvalPlan(lanes=("keyword", "vector")))
    config = {"stages": {"p95_target_ms": 1500.0, "stage2_lanes": ["vector"]}, "lanes": ["keyword", "vector"]}
    art = build_artifact(
        dataset, passes, config=config, calibration_ms=clock.unit_ms, corpus_hash="h", wall_time_s=1.0, revision="r"
    )
    verdict = art["acceptance"]
    assert verdict["arm"] == "vector"
    assert verdict["stage2_only"]["vector"] == art["metrics"]["lanes"]["vector"]["recall_at_10"]
    assert verdict["recall"] == art["metrics"]["fused"]["recall_at_10"]
    assert "## Staged acceptance: " in render_markdown(art)
    plain = build_artifact(
        dataset, passes, config={"lanes": ["keyword", "vector"]}, calibration_ms=None, corpus_hash="h",
        wall_time_s=1.0, revision="r",
    )  # fmt: skip
    assert plain["acceptance"] is None
    assert "Staged acceptance" not in render_markdown(plain)
