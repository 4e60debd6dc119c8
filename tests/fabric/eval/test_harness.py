"""Tests of the eval harness's artifact config."""

from __future__ import annotations

from pathlib import Path

from fabric.eval.harness import EvalPlan, artifact_config
from fabric.settings import load_settings


class TestArtifactConfig:
    def test_carries_the_stage_gate_values(self) -> None:
        """Seed 000: the report's config holds the gate values, the budgets and the stage-2 lanes of the run."""
        settings = load_settings(env={"FABRIC_HOME": "/nonexistent"})
        cfg = artifact_config(settings, EvalPlan(lanes=("keyword", "vector", "graph")))
        assert cfg["stages"] == {
            "min_must_count": 3,
            "stage2_cap_ms": 600.0,
            "stage1_top_n": 20,
            "stage2_top_n": 20,
            "max_appended": 10,
            "ranking": "factors",
            "p95_target_ms": 1500.0,
            "stage2_lanes": [],
        }

    def test_staged_profile_has_a_stage2_lane(self) -> None:
        """The shipped ``staged`` profile puts the graph lane in stage 2."""
        settings = load_settings(profile="staged", env={"FABRIC_HOME": str(Path("/nonexistent"))})
        cfg = artifact_config(settings, EvalPlan(lanes=("keyword", "vector", "graph")))
        assert cfg["stages"]["stage2_lanes"] == ["graph"]
