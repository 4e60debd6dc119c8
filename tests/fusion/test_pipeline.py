"""Tests for fusion.pipeline.fuse: modes, weights, empty lanes, components, ranks and deterministic order."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric.core.models import FusionMode, LaneKind, LaneStatus
from fabric.settings import FactorWeights
from fusion import pipeline
from fusion.pipeline import fuse
from fusion.rrf import fuse_rrf
from tests.fusion.conftest import context, hit, lane, outcomes

MODES = list(FusionMode)


def order(out: object) -> list[str]:
    """Ids of a fusion output, best first."""
    return [it.id for it in out.items]  # type: ignore[attr-defined]


def dump(out: object) -> str:
    """Byte-exact serialisation of a fusion output."""
    return json.dumps([it.to_dict() for it in out.items], sort_keys=True)  # type: ignore[attr-defined]


class TestFuse:
    def test_public_api(self) -> None:
        """The pipeline exports fuse and its context/output types."""
        assert sorted(pipeline.__all__) == ["FusedItems", "FusionContext", "FusionOutput", "fuse"]

    def test_all_lanes_empty(self) -> None:
        """No hits anywhere gives an empty, well-formed output."""
        out = fuse(outcomes(lane("a", []), lane("b", [])), context())
        assert (len(out.items), out.candidates, out.removed) == (0, 0, 0)

    def test_no_outcomes(self) -> None:
        """No lanes at all gives an empty output."""
        assert len(fuse({}, context()).items) == 0

    def test_empty_lane_ignored(self) -> None:
        """An empty lane does not change the fusion of the others."""
        base = fuse(outcomes(lane("a", ["x", "y"])), context())
        with_empty = fuse(outcomes(lane("a", ["x", "y"]), lane("b", [])), context())
        assert dump(base) == dump(with_empty)

    @pytest.mark.parametrize("status", [LaneStatus.TIMEOUT, LaneStatus.ERROR, LaneStatus.SKIPPED])
    def test_failed_lane_ignored(self, status: LaneStatus) -> None:
        """Hits of a lane that did not succeed are not fused."""
        out = fuse(outcomes(lane("a", ["x"]), lane("b", ["y"], status=status)), context())
        assert order(out) == ["x"]

    def test_fallback_lane_used(self) -> None:
        """A fallback lane's hits are fused."""
        out = fuse(outcomes(lane("a", ["x"]), lane("b", ["y"], status=LaneStatus.FALLBACK)), context())
        assert set(order(out)) == {"x", "y"}

    def test_in_lane_duplicate_collapsed(self) -> None:
        """A repeated id inside one lane adds no RRF mass."""
        out = fuse(outcomes(lane("a", ["x", "x", "y"])), context())
        assert out.items[0].scores["rrf"] == 1 / 61
        assert out.items[1].ranks == {"a": 2}
        assert out.removed == 1

    def test_components_and_ranks(self) -> None:
        """Items carry rrf, every factor, native lexical/semantic/graph scores and per-lane ranks."""
        out = fuse(
            outcomes(
                lane("kw", ["x"], kind=LaneKind.KEYWORD, scores=[7.5]),
                lane("vec", ["x"], kind=LaneKind.VECTOR, scores=[0.8]),
                lane("kg", ["x"], kind=LaneKind.GRAPH, scores=[0.4]),
                lane("web", ["x"], kind=LaneKind.WEB, scores=[3.0]),
            ),
            context(),
        )
        item = out.items[0]
        assert {"rrf", "fused", "domain_diversity", "recency", "authority", "quality"} <= set(item.scores)
        assert (item.scores["lexical"], item.scores["semantic"], item.scores["graph"]) == (7.5, 0.8, 0.4)
        assert item.ranks == {"kg": 1, "kw": 1, "vec": 1, "web": 1}
        assert item.lanes == ("kg", "kw", "vec", "web")

    @pytest.mark.parametrize("mode", MODES)
    def test_weights_applied_in_every_mode(self, mode: FusionMode) -> None:
        """Raising one lane's weight puts that lane's top item first, in every mode."""
        a = lane("a", ["x", "y"], scores=[2.0, 1.0])
        b_low = lane("b", ["y", "x"], scores=[2.0, 1.0], weight=0.5)
        b_high = lane("b", ["y", "x"], scores=[2.0, 1.0], weight=3.0)
        assert order(fuse(outcomes(a, b_low), context(mode)))[0] == "x"
        assert order(fuse(outcomes(a, b_high), context(mode)))[0] == "y"

    @pytest.mark.parametrize("mode", MODES)
    def test_score_total_in_unit_interval(self, mode: FusionMode) -> None:
        """score_total stays within [0, 1] in every mode."""
        out = fuse(outcomes(lane("a", ["x", "y", "z"]), lane("b", ["z", "q"], weight=2.0)), context(mode))
        assert all(0.0 <= it.score_total <= 1.0 for it in out.items)

    def test_rrf_mode_score_is_normalised_rrf(self) -> None:
        """In rrf mode with no informative factor, score_total = rrf / ceiling."""
        out = fuse(outcomes(lane("a", ["x", "y"]), lane("b", ["y"])), context())
        ceiling = 2 / 61
        assert [it.score_total for it in out.items] == [(1 / 62 + 1 / 61) / ceiling, (1 / 61) / ceiling]

    def test_append_fill_keeps_stage_one_first(self) -> None:
        """append_fill keeps stage-1 order and appends only new stage-2 ids after it."""
        ctx = context(FusionMode.APPEND_FILL, stage_of={"s2": 2})
        out = fuse(outcomes(lane("s1", ["a", "b"]), lane("s2", ["c", "b", "d"], weight=5.0)), ctx)
        assert order(out) == ["a", "b", "c", "d"]
        assert [it.stage_priority for it in out.items] == [0, 0, 1, 1]

    def test_score_modes_use_native_scores(self) -> None:
        """Score fusion follows the native score gap that RRF ignores."""
        a = lane("a", ["x", "y", "z"], scores=[10.0, 9.9, 0.0])
        b = lane("b", ["z", "y", "x"], scores=[10.0, 9.9, 0.0])
        assert order(fuse(outcomes(a, b), context(FusionMode.SCORE_MINMAX)))[0] == "y"

    def test_combmnz_rewards_agreement(self) -> None:
        """With CombMNZ an item found by two lanes beats a slightly better single-lane item."""
        a = lane("a", ["x", "y"], scores=[1.0, 0.9])
        b = lane("b", ["y", "z"], scores=[1.0, 0.0])
        out = fuse(outcomes(a, b), context(FusionMode.SCORE_MINMAX, combmnz=True))
        assert order(out)[0] == "y"

    def test_output_byte_identical(self) -> None:
        """The same input always serialises to the same bytes."""
        outs = outcomes(lane("a", ["x", "y", "z"]), lane("b", ["z", "x"], kind=LaneKind.VECTOR))
        assert dump(fuse(outs, context())) == dump(fuse(outs, context()))

    def test_matches_reference_rrf_order(self) -> None:
        """With neutral factors the order is the order of the shared RRF function (tie-break by id)."""
        lanes = {"a": ["p", "q", "r", "s"], "b": ["s", "r", "t"], "c": ["q", "t", "p"]}
        ref = fuse_rrf(lanes)
        expected = sorted(ref, key=lambda i: (-ref[i], i))
        out = fuse(outcomes(*(lane(n, ids) for n, ids in lanes.items())), context())
        assert order(out) == expected

    @settings(max_examples=40, deadline=None)
    @given(
        st.lists(st.lists(st.sampled_from(list("abcdefghij")), max_size=8), min_size=1, max_size=4),
        st.randoms(use_true_random=False),
    )
    def test_lane_order_does_not_matter(self, lanes: list[list[str]], rnd: object) -> None:
        """Permuting the order in which lanes are given never changes the output."""
        outs = [lane(f"l{i}", ids, weight=1.0 + i / 4) for i, ids in enumerate(lanes)]
        shuffled = list(outs)
        rnd.shuffle(shuffled)  # type: ignore[attr-defined]
        assert dump(fuse(outcomes(*outs), context())) == dump(fuse(outcomes(*shuffled), context()))


class TestFactorWeights:
    def test_zero_factor_weights_reduce_to_base(self) -> None:
        """With every boost weight 0 the order is the base fusion order even with dated items."""
        a = lane("a", [hit("x", published_at=None), hit("y", rank=2)])
        ctx = context(factors=FactorWeights(domain_diversity=0, recency=0, authority=0, quality=0))
        assert order(fuse(outcomes(a), ctx)) == ["x", "y"]


class TestCombMnzConfig:
    def test_config_switch(self) -> None:
        """config.combmnz turns CombMNZ on like ctx.combmnz."""
        from fabric.settings import FusionConfig
        from fusion.types import FusionContext
        from tests.fusion.conftest import NOW

        a = lane("a", ["x", "y"], scores=[1.0, 0.9])
        b = lane("b", ["y", "z"], scores=[1.0, 0.0])
        ctx = FusionContext(config=FusionConfig(mode=FusionMode.SCORE_MINMAX, combmnz=True), now=NOW)
        assert order(fuse(outcomes(a, b), ctx))[0] == "y"
