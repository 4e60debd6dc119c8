"""Tests of the ``sources`` filter on lane hits."""

from __future__ import annotations

from fabric.core.models import BoundConstraints, Hit, LaneKind, LaneRequest, SourceKind
from fabric.query.constraints import SOURCE_FILTERS
from fabric.query.source_filter import domain_matches, keeps, restrict_sources, widen_request

ACADEMIC = SOURCE_FILTERS["academic"]
NEWS = SOURCE_FILTERS["news"]


def hit(hid: str, rank: int, domain: str = "", kind: SourceKind = SourceKind.IMPORT) -> Hit:
    return Hit(id=hid, rank=rank, score=1.0 / rank, domain=domain, source_kind=kind)


class TestDomainMatches:
    def test_suffix_and_subdomain(self) -> None:
        """``edu`` keeps ``mit.edu``; ``bbc.com`` keeps ``www.bbc.com`` and ``news.bbc.com`` but not ``notbbc.com``."""
        assert domain_matches("mit.edu", ("edu",))
        assert domain_matches("www.bbc.com", ("bbc.com",))
        assert domain_matches("News.BBC.com", ("bbc.com",))
        assert not domain_matches("notbbc.com", ("bbc.com",))
        assert not domain_matches("", ("edu",))


class TestKeeps:
    def test_web_lane_filters_by_domain_only(self) -> None:
        """On a web lane an imported-looking hit without an academic domain is dropped."""
        assert keeps(hit("a", 1, "arxiv.org", SourceKind.WEB), LaneKind.WEB, ACADEMIC)
        assert not keeps(hit("b", 1, "en.wikipedia.org", SourceKind.IMPORT), LaneKind.WEB, ACADEMIC)

    def test_store_lane_filters_by_source_kind(self) -> None:
        """On a store, imported corpora are academic, operator notes and stored web pages are not."""
        assert keeps(hit("a", 1, kind=SourceKind.IMPORT), LaneKind.KEYWORD, ACADEMIC)
        assert not keeps(hit("b", 1, kind=SourceKind.OPERATOR), LaneKind.VECTOR, ACADEMIC)
        assert not keeps(hit("c", 1, "example.com", SourceKind.WEB), LaneKind.GRAPH, ACADEMIC)
        assert keeps(hit("d", 1, "cs.ox.ac.uk", SourceKind.WEB), LaneKind.GRAPH, ACADEMIC)

    def test_news_lane_kind_keeps_everything(self) -> None:
        """Every item of a news feed lane is news; a web lane needs a news domain."""
        assert keeps(hit("a", 1, "blog.example.org", SourceKind.WEB), LaneKind.NEWS, NEWS)
        assert keeps(hit("b", 1, "reuters.com", SourceKind.WEB), LaneKind.WEB, NEWS)
        assert not keeps(hit("c", 1, "mit.edu", SourceKind.WEB), LaneKind.WEB, NEWS)
        assert not keeps(hit("d", 1, kind=SourceKind.IMPORT), LaneKind.KEYWORD, NEWS)


class TestRestrictSources:
    def test_no_filter_returns_the_same_list(self) -> None:
        hits = [hit("a", 1), hit("b", 2)]
        assert restrict_sources(hits, LaneKind.WEB, None) is hits

    def test_kept_hits_reranked_in_order(self) -> None:
        """Dropped hits leave no gaps: the kept ones are ranked 1..n in lane order."""
        hits = [hit("a", 1, "x.com"), hit("b", 2, "mit.edu"), hit("c", 3, "y.com"), hit("d", 4, "ox.ac.uk")]
        out = restrict_sources(hits, LaneKind.WEB, ACADEMIC)
        assert [(h.id, h.rank) for h in out] == [("b", 1), ("d", 2)]


class TestWidenRequest:
    def test_filtered_lane_asked_for_more_bounded(self) -> None:
        """Under a filter a lane is asked for top_k × 3, at most 100, and never for fewer than it asked."""
        academic = BoundConstraints(source_filter=ACADEMIC)
        assert widen_request(LaneRequest(query="q", top_k=10, constraints=academic), LaneKind.VECTOR).top_k == 30
        assert widen_request(LaneRequest(query="q", top_k=50, constraints=academic), LaneKind.WEB).top_k == 100
        assert widen_request(LaneRequest(query="q", top_k=120, constraints=academic), LaneKind.WEB).top_k == 120

    def test_unfiltered_and_kept_whole_lanes_unchanged(self) -> None:
        """No filter, or a lane kind the filter keeps whole (news feeds for news): the request itself."""
        plain = LaneRequest(query="q", top_k=10)
        assert widen_request(plain, LaneKind.KEYWORD) is plain
        news = LaneRequest(query="q", top_k=10, constraints=BoundConstraints(source_filter=NEWS))
        assert widen_request(news, LaneKind.NEWS) is news
        assert widen_request(news, LaneKind.WEB).top_k == 30
