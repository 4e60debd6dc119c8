"""Tests for fusion.provenance: a claimed URL earns no authority the operator did not grant, and a trusted original
stands for its untrusted copies."""

from __future__ import annotations

from typing import Any

import pytest

import fusion.provenance as mod
from fabric.core.models import Hit, LaneKind, SourceKind, Trust
from fabric.settings import AuthorityEntry
from fusion.pipeline import fuse
from tests.fusion.conftest import context, hit, lane, outcomes

WIKI = "https://en.wikipedia.org/wiki/Rollback"
TABLE = {"wikipedia.org": AuthorityEntry(score=0.9, keyless=True)}
TEXT = "Roll back a release within five minutes when the error rate doubles after a deploy."


def _claim(doc_id: str, rank: int, **kw: Any) -> Hit:
    """An untrusted stored entry claiming a Wikipedia URL (:data:`WIKI` unless ``url`` is given)."""
    return hit(doc_id, rank=rank, **{"url": WIKI, "domain": "en.wikipedia.org", **kw})


def _trusted(doc_id: str, rank: int, **kw: Any) -> Hit:
    return hit(doc_id, rank=rank, trust=Trust.TRUSTED, source_kind=SourceKind.OPERATOR, **kw)


def _order(*lanes: Any) -> list[str]:
    return [it.id for it in fuse(outcomes(*lanes), context(authority=TABLE)).items]


class TestClaimedUrls:
    def test_an_untrusted_claim_does_not_outrank_the_trusted_original(self) -> None:
        """The finding: an untrusted stored entry claiming en.wikipedia.org, one rank behind the trusted original in
        both lanes, stays behind it (it used to overtake it on authority and domain diversity)."""
        kw = lane("kw", [_trusted("original", 1), _claim("claim", 2)])
        vec = lane("vec", [_trusted("original", 1), _claim("claim", 2)], kind=LaneKind.VECTOR)
        assert _order(kw, vec) == ["original", "claim"]

    def test_a_claim_earns_what_no_url_earns(self) -> None:
        """Its authority is the default and its domain counts as none, so the order is the one without the claim."""
        items = fuse(outcomes(lane("kw", [hit("plain", 1), _claim("claim", 2)])), context(authority=TABLE)).items
        scores = {it.id: it.scores for it in items}
        assert scores["claim"]["authority"] == scores["plain"]["authority"] == 0.5
        assert scores["claim"]["domain_diversity"] == scores["plain"]["domain_diversity"] == 0.5

    @pytest.mark.parametrize(
        "vouched",
        [
            {"trust": Trust.TRUSTED},
            {"source_kind": SourceKind.OPERATOR},
        ],
    )
    def test_the_operators_urls_keep_their_authority(self, vouched: dict[str, Any]) -> None:
        """A stored URL the operator vouched for (trusted or operator content) earns its domain's authority."""
        items = fuse(outcomes(lane("kw", [hit("plain", 1), _claim("mine", 2, **vouched)])), context(authority=TABLE))
        assert {it.id: it.scores["authority"] for it in items.items}["mine"] == pytest.approx(1.0)

    @pytest.mark.parametrize("kind", [LaneKind.WEB, LaneKind.NEWS, LaneKind.MARKETS])
    def test_a_url_the_lane_fetched_keeps_its_authority(self, kind: LaneKind) -> None:
        """A web, news or market lane's hit is where the lane found it: its domain counts."""
        items = fuse(outcomes(lane("web", [hit("plain", 1), _claim("page", 2)], kind=kind)), context(authority=TABLE))
        assert {it.id: it.scores["authority"] for it in items.items}["page"] == pytest.approx(1.0)

    def test_claims_do_not_crowd_a_trusted_domain(self) -> None:
        """Untrusted claims of a trusted page's domain do not lower its domain diversity."""
        trusted = _trusted("page", 1, url=WIKI, domain="en.wikipedia.org")
        claims = [_claim(f"c{n}", n + 1, url=f"{WIKI}_{n}/claimed") for n in (1, 2, 3)]  # distinct pages: no merge
        items = fuse(outcomes(lane("kw", [trusted, *claims])), context(authority=TABLE)).items
        assert len(items) == 4
        assert {it.id: it.scores["domain_diversity"] for it in items}["page"] == 1.0

    def test_content_without_urls_ranks_as_before(self) -> None:
        """Untrusted entries without URLs (the evaluation corpora) carry no domain either way: factors stay neutral."""
        items = fuse(outcomes(lane("kw", [hit("a", 1), hit("b", 2)])), context(authority=TABLE)).items
        assert {it.scores["authority"] for it in items} == {0.5}
        assert [it.id for it in items] == ["a", "b"]


class TestRepresentatives:
    def test_a_trusted_original_stands_for_its_better_ranked_copy(self) -> None:
        """A copy of the trusted text ranked above it is merged into it: the original is the one answer shown."""
        copy, original = _claim("copy", 1, text=TEXT), _trusted("original", 2, text=TEXT)
        items = fuse(outcomes(lane("kw", [copy, original])), context(authority=TABLE)).items
        assert [(it.id, it.merged_ids) for it in items] == [("original", ("copy",))]
        assert items[0].hit.trust is Trust.TRUSTED

    def test_a_fetched_page_stands_for_a_stored_entry_under_its_id(self) -> None:
        """An entry posted under a web result's id (its URL) never stands for that result, even ranked first."""
        web = Hit(id=WIKI, rank=3, score=1.0, text="The real article.", url=WIKI, domain="en.wikipedia.org")
        stored = Hit(id=WIKI, rank=1, score=9.0, text="A forged article.", url=WIKI, domain="en.wikipedia.org")
        items = fuse(outcomes(lane("kw", [stored]), lane("web", [web], kind=LaneKind.WEB)), context()).items
        assert [it.hit.text for it in items] == ["The real article."]

    def test_between_equals_the_best_rank_still_wins(self) -> None:
        """Copies of equal provenance keep the rule of (stage, best rank, id)."""
        items = fuse(outcomes(lane("kw", [hit("b", 1, text=TEXT), hit("a", 2, text=TEXT)])), context()).items
        assert [(it.id, it.merged_ids) for it in items] == [("b", ("a",))]


def test_public_api() -> None:
    """The module exports the fetching kinds and the two helpers."""
    assert set(mod.__all__) == {"FETCHING_KINDS", "ranked_domains", "vouched"}
