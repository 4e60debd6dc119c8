"""Tests for fusion.combine: candidate collection and the per-mode scorer."""

from __future__ import annotations

from fabric.models import FusionMode, LaneKind, LaneStatus
from fusion import combine
from fusion.combine import ModeScorer, collect
from tests.fusion.conftest import context, hit, lane, outcomes


class TestCollect:
    def test_public_api(self) -> None:
        """The module exports collect, the scorer stage and the kind → component map."""
        assert sorted(combine.__all__) == ["COMPONENT_OF_KIND", "ModeScorer", "collect"]

    def test_counts_every_hit_and_merges_ids(self) -> None:
        """Every received hit is counted; one candidate per distinct id."""
        _, cands, rankings, hits = collect(outcomes(lane("a", ["x", "x", "y"]), lane("b", ["y"])), context())
        assert (hits, sorted(c["id"] for c in cands)) == (4, ["x", "y"])
        assert rankings == {"a": ["x", "y"], "b": ["y"]}

    def test_representative_prefers_stage_one_then_rank(self) -> None:
        """The representative hit comes from a stage-1 lane, at its best rank."""
        s1 = lane("s1", [hit("p"), hit("x", rank=2, title="from s1")])
        s2 = lane("s2", [hit("x", title="from s2")])
        _, cands, _, _ = collect(outcomes(s1, s2), context(stage_of={"s2": 2}))
        x = next(c for c in cands if c["id"] == "x")
        assert (x["hit"].title, x["stage"], x["best"]) == ("from s1", 0, 1)

    def test_unusable_lanes_skipped(self) -> None:
        """Timed-out lanes are not part of the run."""
        run, _, _, _ = collect(outcomes(lane("a", ["x"]), lane("b", ["y"], status=LaneStatus.TIMEOUT)), context())
        assert list(run.lanes) == ["a"]

    def test_score_modes_normalise_per_lane(self) -> None:
        """Score modes attach each lane's normalised score."""
        _, cands, _, _ = collect(outcomes(lane("a", ["x", "y"], scores=[4.0, 2.0])), context(FusionMode.SCORE_MINMAX))
        assert {c["id"]: c["norm"]["a"] for c in cands} == {"x": 1.0, "y": 0.0}


class TestModeScorer:
    def test_native_components_by_kind(self) -> None:
        """Keyword, vector and graph lanes fill lexical, semantic and graph; other kinds add none."""
        outs = outcomes(
            lane("kw", ["x"], scores=[3.0]),
            lane("web", ["x"], kind=LaneKind.WEB, scores=[9.0]),
        )
        run, cands, rankings, _ = collect(outs, context())
        scored = ModeScorer(rankings)(cands, run)
        assert {k for k in scored[0]["scores"] if k in ("lexical", "semantic", "graph")} == {"lexical"}
