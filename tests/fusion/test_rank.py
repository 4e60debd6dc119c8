"""Tests for fusion.rank: factor scale, neutrality of no-information factors, order."""

from __future__ import annotations

from datetime import timedelta

from fabric.core.models import Hit, LaneKind
from fabric.settings import AuthorityEntry, FactorWeights
from fusion import rank
from fusion.pipeline import FusionOutput, fuse
from tests.fusion.conftest import NOW, context, hit, lane, outcomes

IDS = [f"d{i:02d}" for i in range(30)]
ZERO = FactorWeights(domain_diversity=0, recency=0, authority=0, quality=0)


def two_lanes(make: object = None) -> dict[str, object]:
    """Two overlapping lanes of 30 hits; ``make(id, rank)`` builds each hit."""
    build = make or (lambda i, r: hit(i, rank=r))
    a = [build(i, r) for r, i in enumerate(IDS, 1)]  # type: ignore[operator]
    b = [build(i, r) for r, i in enumerate(reversed(IDS[5:]), 1)]  # type: ignore[operator]
    return outcomes(lane("kw", a), lane("vec", b, kind=LaneKind.VECTOR))  # type: ignore[return-value]


def order(out: FusionOutput) -> list[str]:
    """Ids best first."""
    return [it.id for it in out.items]


class TestNeutrality:
    def test_public_api(self) -> None:
        """The module exports the ranker, its factor list and sort key."""
        assert sorted(rank.__all__) == ["FACTORS", "Ranker", "sort_key"]

    def test_no_information_keeps_base_order(self) -> None:
        """No dates, no domains, no authority entries, no quality: the full ranking equals the base fusion."""
        outs = two_lanes()
        assert order(fuse(outs, context())) == order(fuse(outs, context(factors=ZERO)))  # type: ignore[arg-type]

    def test_no_information_score_is_base(self) -> None:
        """With no informative factor, score_total is exactly the normalised fused score."""
        out = fuse(two_lanes(), context())  # type: ignore[arg-type]
        assert all(it.score_total == it.scores["fused"] for it in out.items)

    def test_single_domain_is_neutral(self) -> None:
        """Every item on one domain (diversity equal for all) does not reorder."""
        outs = two_lanes(lambda i, r: hit(i, rank=r, domain="one.org"))
        assert order(fuse(outs, context())) == order(fuse(outs, context(factors=ZERO)))  # type: ignore[arg-type]

    def test_same_date_is_neutral(self) -> None:
        """Every item with the same date does not reorder."""
        outs = two_lanes(lambda i, r: hit(i, rank=r, published_at=NOW - timedelta(days=3)))
        assert order(fuse(outs, context())) == order(fuse(outs, context(factors=ZERO)))  # type: ignore[arg-type]

    def test_unlisted_domains_are_neutral(self) -> None:
        """Distinct but unlisted domains give equal authority and distinct domains equal diversity."""
        outs = two_lanes(lambda i, r: hit(i, rank=r, domain=f"{i}.example"))
        table = {"wikipedia.org": AuthorityEntry(score=0.9)}
        got = order(fuse(outs, context(authority=table)))  # type: ignore[arg-type]
        assert got == order(fuse(outs, context(factors=ZERO)))  # type: ignore[arg-type]

    def test_equal_quality_is_neutral(self) -> None:
        """The same quality everywhere does not reorder."""
        outs = two_lanes(lambda i, r: hit(i, rank=r, quality=0.7))
        assert order(fuse(outs, context())) == order(fuse(outs, context(factors=ZERO)))  # type: ignore[arg-type]


class TestFactors:
    def test_informative_recency_reorders(self) -> None:
        """A fresh item among old ones moves up when dates differ."""

        def make(i: str, r: int) -> Hit:
            days = 0 if i == "d20" else 900
            return hit(i, rank=r, published_at=NOW - timedelta(days=days))

        outs = two_lanes(make)
        assert order(fuse(outs, context())).index("d20") < order(fuse(outs, context(factors=ZERO))).index("d20")  # type: ignore[arg-type]

    def test_fused_factor_reaches_one(self) -> None:
        """An item ranked first in every lane has fused = 1, the same scale as the boosts (not a raw ≈ 0.03)."""
        out = fuse(outcomes(lane("kw", ["x", "y"]), lane("vec", ["x"], weight=0.5)), context())
        assert out.items[0].scores["fused"] == 1.0

    def test_scores_in_unit_interval(self) -> None:
        """Every factor and score_total lie in [0, 1]."""
        outs = two_lanes(lambda i, r: hit(i, rank=r, domain=f"{int(i[1:]) % 3}.org", quality=r / 40))
        for it in fuse(outs, context()).items:  # type: ignore[arg-type]
            assert 0.0 <= it.score_total <= 1.0
            assert all(0.0 <= it.scores[f] <= 1.0 for f in ("fused", *rank.FACTORS))
