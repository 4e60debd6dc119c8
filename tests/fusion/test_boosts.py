"""Tests for fusion.boosts: recency steps, authority lookup, domain diversity, quality."""

from __future__ import annotations

from datetime import timedelta

import pytest

from fabric.core.models import LaneKind
from fabric.settings import AuthorityEntry
from fusion import boosts
from fusion.boosts import KEYLESS_BONUS, authority_of, recency_of
from fusion.pipeline import fuse
from tests.fusion.conftest import NOW, context, hit, lane, outcomes

TABLE = {
    "wikipedia.org": AuthorityEntry(score=0.9, keyless=True),
    "github.com": AuthorityEntry(score=0.8),
}


class TestRecency:
    def test_public_api(self) -> None:
        """The module exports the boosters and helpers."""
        assert "RecencyBooster" in boosts.__all__
        assert "DomainDiversityBooster" in boosts.__all__

    @pytest.mark.parametrize(
        ("age", "expected"),
        [
            (timedelta(hours=3), 1.0),
            (timedelta(days=1), 1.0),
            (timedelta(days=6), 0.8),
            (timedelta(days=29), 0.6),
            (timedelta(days=300), 0.4),
            (timedelta(days=800), 0.2),
        ],
    )
    def test_age_steps(self, age: timedelta, expected: float) -> None:
        """Recency follows the seed's age steps relative to now."""
        assert recency_of(NOW - age, NOW) == expected

    def test_undated_is_half(self) -> None:
        """An undated item scores 0.5."""
        assert recency_of(None, NOW) == 0.5

    def test_naive_date_taken_as_utc(self) -> None:
        """A naive datetime is read as UTC instead of raising."""
        assert recency_of((NOW - timedelta(days=3)).replace(tzinfo=None), NOW) == 0.8

    def test_future_date_is_fresh(self) -> None:
        """A date after now counts as age 0."""
        assert recency_of(NOW + timedelta(days=2), NOW) == 1.0


class TestAuthority:
    def test_listed_domain(self) -> None:
        """A listed domain gets its score."""
        assert authority_of("github.com", TABLE, 0.5) == 0.8

    def test_parent_domain(self) -> None:
        """A subdomain inherits its closest listed parent's score."""
        assert authority_of("en.wikipedia.org", TABLE, 0.5) == pytest.approx(min(1.0, 0.9 + KEYLESS_BONUS))

    def test_keyless_bonus(self) -> None:
        """Keyless sources get the bonus on top of their score."""
        assert authority_of("wikipedia.org", TABLE, 0.5) > 0.9

    def test_unlisted_gets_default(self) -> None:
        """An unlisted domain gets the default."""
        assert authority_of("example.com", TABLE, 0.4) == 0.4


class TestDomainDiversity:
    def test_one_over_domain_count(self) -> None:
        """domain_diversity is 1 / the number of candidates sharing the domain; no domain is 0.5."""
        hits = [hit("a", domain="x.org"), hit("b", domain="x.org"), hit("c", domain="y.org"), hit("d")]
        out = fuse(outcomes(lane("l", hits, kind=LaneKind.WEB)), context())
        got = {it.id: it.scores["domain_diversity"] for it in out.items}
        assert got == {"a": 0.5, "b": 0.5, "c": 1.0, "d": 0.5}


class TestQuality:
    def test_quality_saturates_or_half(self) -> None:
        """quality is ingest-time quality / 0.8 capped at 1, and 0.5 when unknown."""
        out = fuse(outcomes(lane("l", [hit("a", quality=0.9), hit("b"), hit("c", quality=0.4)])), context())
        assert {it.id: it.scores["quality"] for it in out.items} == {"a": 1.0, "b": 0.5, "c": 0.5}

    def test_good_documents_are_equal(self) -> None:
        """Documents at or above QUALITY_GOOD do not reorder each other."""
        hits = [hit("a", quality=0.85), hit("b", rank=2, quality=0.99)]
        assert [it.id for it in fuse(outcomes(lane("l", hits)), context()).items] == ["a", "b"]
