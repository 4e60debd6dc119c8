"""Fixture-backed determinism tests (seed 000 §7): append_fill, RRF scores and the tie-break rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fabric.core.models import FusionMode
from fabric.settings import FusionConfig
from fusion.pipeline import FusionContext, FusionOutput, fuse
from tests.fusion.conftest import NOW, lane, outcomes

FIXTURES = Path(__file__).parent / "fixtures"


def load(name: str) -> dict[str, Any]:
    """Read one fixture file."""
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return data


def run_case(case: dict[str, Any]) -> FusionOutput:
    """Fuse the lanes a fixture case describes."""
    lanes = [
        lane(spec["name"], spec["ids"], weight=spec["weight"], scores=spec.get("scores")) for spec in case["lanes"]
    ]
    ctx = FusionContext(
        config=FusionConfig(mode=FusionMode.from_str(case["mode"]), rrf_k=case["k"]),
        now=NOW,
        stage_of={spec["name"]: spec["stage"] for spec in case["lanes"]},
    )
    return fuse(outcomes(*lanes), ctx)


def serialise(out: FusionOutput) -> str:
    """Byte-exact serialisation of the ranked items."""
    return json.dumps([it.to_dict() for it in out.items], sort_keys=True)


class TestFixtures:
    def test_append_fill_order(self) -> None:
        """append_fill keeps the stage-1 RRF order and appends new stage-2 ids."""
        case = load("append_fill.json")
        out = run_case(case)
        assert [it.id for it in out.items] == case["expected_order"]
        assert [it.stage_priority for it in out.items] == case["expected_stage_priority"]

    def test_append_fill_deterministic(self) -> None:
        """append_fill output is byte-identical across runs."""
        case = load("append_fill.json")
        assert serialise(run_case(case)) == serialise(run_case(case))

    def test_rrf_scores_exact(self) -> None:
        """RRF components equal the fixture's exact floats and the order follows the tie-break."""
        case = load("rrf_scores.json")
        out = run_case(case)
        assert {it.id: it.scores["rrf"] for it in out.items} == case["expected_rrf"]
        assert [it.id for it in out.items] == case["expected_order"]

    def test_rrf_scores_deterministic(self) -> None:
        """RRF output is byte-identical across runs."""
        case = load("rrf_scores.json")
        assert serialise(run_case(case)) == serialise(run_case(case))

    @pytest.mark.parametrize("case", load("tie_break.json")["cases"], ids=lambda c: c["name"])
    def test_tie_break(self, case: dict[str, Any]) -> None:
        """Equal scores are ordered by stage priority, then best rank, then id."""
        out = run_case(case)
        assert [it.id for it in out.items] == case["expected_order"]
        assert serialise(out) == serialise(run_case(case))
