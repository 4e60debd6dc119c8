"""Tests for fusion.combine: candidate collection and the per-mode scorer."""

from __future__ import annotations

from fabric.core.models import FusionMode, LaneKind, LaneStatus
from fusion import combine
from fusion.combine import ModeScorer, collect
from fusion.pipeline import fuse
from tests.fusion.conftest import context, hit, lane, outcomes


class TestCollect:
    def test_public_api(self) -> None:
        """The module exports collect, the scorer stage and the kind → component map."""
        assert sorted(combine.__all__) == ["COMPONENT_OF_KIND", "ModeScorer", "collect"]

    def test_counts_every_hit_and_merges_ids(self) -> None:
        """Every received hit is counted; one candidate per distinct id."""
        _, cands = collect(outcomes(lane("a", ["x", "x", "y"]), lane("b", ["y"])), context())
        assert (cands.received, sorted(cands.ids)) == (4, ["x", "y"])
        assert {lane: [cands.ids[j] for j in rows] for lane, rows in zip(cands.lanes, cands.rows, strict=True)} == {
            "a": ["x", "y"],
            "b": ["y"],
        }

    def test_representative_prefers_stage_one_then_rank(self) -> None:
        """The representative hit comes from a stage-1 lane, at its best rank."""
        s1 = lane("s1", [hit("p"), hit("x", rank=2, title="from s1")])
        s2 = lane("s2", [hit("x", title="from s2")])
        _, cands = collect(outcomes(s1, s2), context(stage_of={"s2": 2}))
        x = cands.ids.index("x")
        assert (cands.hits[x].title, cands.stage[x], cands.best[x]) == ("from s1", 0, 1)

    def test_unusable_lanes_skipped(self) -> None:
        """Timed-out lanes are not part of the run."""
        run, _ = collect(outcomes(lane("a", ["x"]), lane("b", ["y"], status=LaneStatus.TIMEOUT)), context())
        assert list(run.lanes) == ["a"]

    def test_score_modes_normalise_per_lane(self) -> None:
        """Score modes attach each lane's normalised score."""
        _, cands = collect(outcomes(lane("a", ["x", "y"], scores=[4.0, 2.0])), context(FusionMode.SCORE_MINMAX))
        assert {cands.ids[j]: v for j, v in zip(cands.rows[0], cands.norm[0], strict=True)} == {"x": 1.0, "y": 0.0}


class TestModeScorer:
    def test_native_components_by_kind(self) -> None:
        """Keyword, vector and graph lanes fill lexical, semantic and graph; other kinds add none."""
        outs = outcomes(
            lane("kw", ["x"], scores=[3.0]),
            lane("web", ["x"], kind=LaneKind.WEB, scores=[9.0]),
        )
        item = fuse(outs, context()).items[0]
        assert {k for k in item.scores if k in ("lexical", "semantic", "graph")} == {"lexical"}
        assert item.scores["lexical"] == 3.0

    def test_rrf_column(self) -> None:
        """The scorer sets raw weighted RRF per row, 1-based ranks with k = 60."""
        run, cands = collect(outcomes(lane("a", ["x", "y"]), lane("b", ["y"], weight=0.5)), context())
        scored = ModeScorer()(cands, run)
        assert dict(zip(scored.ids, scored.rrf, strict=True)) == {"x": 1 / 61, "y": 1 / 62 + 0.5 / 61}
