"""Tests for fusion.literal: the fusion policy's additive boosts and literal ranking, the staged order, the dedup
criteria weights; every expected value computed by hand from the formulas."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from fabric.core.models import FusionMode, Hit, LaneKind, LaneOutcome, Trust
from fabric.settings import AdditiveBoosts, DedupConfig, DedupWeights, FactorWeights, FusionConfig, StageConfig
from fusion import literal
from fusion.combine import collect
from fusion.dedup import find_duplicates
from fusion.literal import recency_step
from fusion.pipeline import FusionOutput, fuse
from fusion.types import FusionContext
from tests.fusion.conftest import NOW, hit, lane, outcomes

SEED_BOOSTS = AdditiveBoosts(domain=0.1, recency=0.05)
STEPS = SEED_BOOSTS.recency_steps
BODY = " ".join(f"word{i}" for i in range(60))


def ctx(mode: FusionMode = FusionMode.RRF, stage_of: dict[str, int] | None = None, **cfg: Any) -> FusionContext:
    """A context at NOW over ``FusionConfig(mode, **cfg)``."""
    return FusionContext(config=FusionConfig(mode=mode, **cfg), now=NOW, stage_of=stage_of or {})


def ids(out: FusionOutput) -> list[str]:
    return [it.id for it in out.items]


def three_items() -> dict[str, LaneOutcome]:
    """Lane a: x (d1, 12 h old, quality 0.9), y (d1, undated, 0.6); lane b: y, z (d2, 10 days old, no quality)."""
    x = hit("x", domain="d1.org", trust=Trust.TRUSTED, published_at=NOW - timedelta(hours=12), quality=0.9)
    y = hit("y", domain="d1.org", trust=Trust.TRUSTED, quality=0.6)
    z = hit("z", domain="d2.org", trust=Trust.TRUSTED, published_at=NOW - timedelta(days=10))
    return outcomes(lane("a", [x, y]), lane("b", [y, z], kind=LaneKind.VECTOR))


class TestRecencyStep:
    @pytest.mark.parametrize(
        ("age_days", "step"), [(0.0, 1.0), (1.0, 1.0), (1.5, 0.5), (7.0, 0.5), (20.0, 0.2), (30.0, 0.2), (31.0, 0.0)]
    )
    def test_policy_buckets(self, age_days: float, step: float) -> None:
        """≤ 1 d → 1, ≤ 7 d → 0.5, ≤ 30 d → 0.2, older → 0 (the boost is 0.05 times that)."""
        assert recency_step(NOW - timedelta(days=age_days), NOW, STEPS) == step

    def test_undated_and_future(self) -> None:
        """No date → 0; a future date counts as age 0."""
        assert recency_step(None, NOW, STEPS) == 0.0
        assert recency_step(NOW + timedelta(days=3), NOW, STEPS) == 1.0


class TestAdditiveBoosts:
    def test_public_api(self) -> None:
        assert sorted(literal.__all__) == [
            "PolicyRanker",
            "additive_boosts",
            "is_staged",
            "policy_ranker",
            "recency_step",
        ]

    def test_fused_score_is_rrf_plus_boosts(self) -> None:
        """Lanes in name order, ranks in order: x 0.1 + 0.05, y 0.1/2 then 0.1/3 (d1 already twice), z 0.1 + 0.01."""
        out = fuse(three_items(), ctx(boosts=SEED_BOOSTS, factor_scaling="literal"))
        fused = {it.id: it.scores["fused"] for it in out.items}
        assert fused["x"] == pytest.approx(1 / 61 + 0.1 + 0.05)
        assert fused["y"] == pytest.approx(1 / 61 + 1 / 62 + 0.1 / 2 + 0.1 / 3)
        assert fused["z"] == pytest.approx(1 / 62 + 0.1 + 0.05 * 0.2)

    def test_boosts_break_ties_of_the_literal_total(self) -> None:
        """Two items first in one lane each, nothing else known: equal totals; the domain boost of the item fused
        first (0.1 against 0.1/2: items without a domain share one) puts it ahead, where the id would not."""
        outs = outcomes(lane("a", ["m2"]), lane("b", ["m1"], kind=LaneKind.VECTOR))
        boosted = fuse(outs, ctx(boosts=SEED_BOOSTS, factor_scaling="literal"))
        plain = fuse(outs, ctx(factor_scaling="literal"))
        assert boosted.items[0].score_total == boosted.items[1].score_total
        assert (ids(boosted), ids(plain)) == (["m2", "m1"], ["m1", "m2"])

    def test_off_by_default(self) -> None:
        """Without [fusion.boosts] the fused score is the mode's, unchanged."""
        out = fuse(three_items(), ctx())
        assert {it.id: it.scores["fused"] for it in out.items}["x"] == pytest.approx((1 / 61) / (2 / 61))


class TestLiteralRanking:
    def test_totals_are_the_weighted_sum(self) -> None:
        """0.5 · raw RRF + 0.2 · 1/n_domain + 0.15 · recency step + 0.1 · authority + 0.05 · raw quality."""
        out = fuse(three_items(), ctx(factor_scaling="literal"))
        total = {it.id: it.score_total for it in out.items}
        assert total["x"] == pytest.approx(0.5 / 61 + 0.2 / 2 + 0.15 * 1.0 + 0.1 * 0.5 + 0.05 * 0.9)
        assert total["y"] == pytest.approx(0.5 * (1 / 61 + 1 / 62) + 0.2 / 2 + 0.15 * 0.5 + 0.1 * 0.5 + 0.05 * 0.6)
        assert total["z"] == pytest.approx(0.5 / 62 + 0.2 / 1 + 0.15 * 0.6 + 0.1 * 0.5 + 0.05 * 0.5)
        assert ids(out) == ["z", "x", "y"]
        assert out.items[0].scores["quality"] == 0.5  # z: unknown
        assert out.items[1].scores["quality"] == 0.9  # x: raw, not saturated at 0.8

    def test_items_without_domain_share_one(self) -> None:
        """Diversity 1 / n over the domainless items too (the policy counts the empty domain like any other)."""
        out = fuse(outcomes(lane("a", ["p", "q", "r", "s"])), ctx(factor_scaling="literal"))
        assert {it.scores["domain_diversity"] for it in out.items} == {0.25}

    def test_normalised_is_the_default(self) -> None:
        """The default ranking is the weighted mean of [0, 1] factors: a different total for the same input."""
        out = fuse(three_items(), ctx())
        assert {it.id: it.score_total for it in out.items}["x"] != pytest.approx(0.5 / 61 + 0.345)


class TestStagedOrder:
    def staged(self, mode: FusionMode, ranking: str) -> FusionOutput:
        """kw (stage 1): a1, a2 (a2 dated today on its own domain: the factors lift it); fill (stage 2): b1."""
        a1 = hit("a1", domain="one.org", trust=Trust.TRUSTED, published_at=NOW - timedelta(days=900))
        a2 = hit("a2", domain="two.org", trust=Trust.TRUSTED, published_at=NOW)
        outs = outcomes(lane("kw", [a1, a2]), lane("fill", ["b1"], kind=LaneKind.VECTOR))
        c = ctx(mode, stage_of={"kw": 1, "fill": 2}, stages=StageConfig(ranking=ranking))
        return fuse(outs, c)

    def test_rrf_fusion_orders_by_fused_rrf_and_tie_break(self) -> None:
        """a1 and b1 both rank 1 (equal RRF): stage priority puts a1 first, then b1, then a2 (rank 2)."""
        out = self.staged(FusionMode.RRF, "fused")
        assert ids(out) == ["a1", "b1", "a2"]
        assert all(it.score_total == it.scores["fused"] for it in out.items)
        assert ids(self.staged(FusionMode.RRF, "factors"))[0] == "a2"  # the factors reorder by default

    def test_append_fill_keeps_stage_one_as_is(self) -> None:
        """Stage 1 keeps its own order (a1 before a2, whatever the factors say); the stage-2 item is appended."""
        assert ids(self.staged(FusionMode.APPEND_FILL, "fused")) == ["a1", "a2", "b1"]
        assert ids(self.staged(FusionMode.APPEND_FILL, "factors")) == ["a2", "a1", "b1"]

    def test_unstaged_call_keeps_the_ranking(self) -> None:
        """Without a stage-2 lane among the fused ones, ranking = "fused" changes nothing."""
        outs = outcomes(lane("kw", ["a1", "a2"]))
        c = ctx(stages=StageConfig(ranking="fused"), factors=FactorWeights())
        assert ids(fuse(outs, c)) == ids(fuse(outs, ctx()))


class TestDedupWeights:
    def groups(self, weights: DedupWeights, *hits: Hit) -> list[int]:
        _, cands = collect(outcomes(lane("a", list(hits))), ctx())
        g, _ = find_duplicates(cands, DedupConfig(weights=weights))
        return [g.find(i) for i in range(len(cands))]

    def test_near_weight_zero_keeps_near_copies(self) -> None:
        """The policy has no near-duplicate criterion: with near = 0, bodies one word apart stay apart."""
        pair = (hit("x", text=BODY), hit("y", rank=2, text=BODY.replace("word30", "changed")))
        assert len(set(self.groups(DedupWeights(), *pair))) == 1
        assert len(set(self.groups(DedupWeights(near=0.0), *pair))) == 2

    def test_content_still_merges_without_near(self) -> None:
        """The policy's weights (title 0.7, content 0.2, URL 0.1, near 0): equal bodies still merge."""
        seed = DedupWeights(title=0.7, content=0.2, url=0.1, near=0.0)
        assert len(set(self.groups(seed, hit("x", text=BODY), hit("y", rank=2, text=BODY)))) == 1

    def test_title_weight_zero(self) -> None:
        """A title criterion weighted 0 is off."""
        t = "Aspirin lowers the risk of heart attack"
        pair = (hit("x", title=t, domain="n.org"), hit("y", rank=2, title=t, domain="n.org"))
        assert len(set(self.groups(DedupWeights(), *pair))) == 1
        assert len(set(self.groups(DedupWeights(title=0.0), *pair))) == 2
