"""MeilisearchKeywordLane and MeilisearchWriter against a loopback Meilisearch stand-in."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import lanes.keyword.meilisearch.lane as mod
from fabric.core.chunks import Chunk
from fabric.core.errors import LaneRejected, LaneTimeout, LaneUnavailable
from fabric.core.models import BoundConstraints, LaneKind, LaneRequest
from fabric.core.tenants import tenant_home
from lanes.base import LaneResources, LaneSpec
from lanes.keyword.meilisearch.lane import MeilisearchKeywordLane, build_filter, quote_value
from lanes.keyword.meilisearch.writer import MeilisearchWriter
from tests.lanes.keyword.fake_meili import FakeMeili
from tests.support.http import guarded, serve
from tests.support.tenants import own_ids, plain, search_as_each, write_as_each

CHUNKS = [
    Chunk(
        id="d1#0",
        doc_id="d1",
        chunk_id="0",
        title="Reciprocal rank fusion",
        text="RRF fuses rankings by rank.",
        url="https://a.org/rrf",
        domain="a.org",
        published_at=datetime(2024, 1, 1, tzinfo=UTC),
    ),
    Chunk(
        id="d2#0",
        doc_id="d2",
        chunk_id="0",
        title="BM25",
        text="Okapi BM25 ranks documents by term frequency.",
        url="https://b.org/bm25",
        domain="b.org",
        published_at=datetime(2015, 1, 1, tzinfo=UTC),
    ),
    Chunk(id="d3#0", doc_id="d3", chunk_id="0", title="Undated rank note", text="rank without a date", domain="c.org"),
]


def _lane(port: int, session: Any, **opts: Any) -> MeilisearchKeywordLane:
    spec = LaneSpec(
        name="keyword",
        kind=LaneKind.KEYWORD,
        backend="meilisearch",
        options={"url": f"http://meilisearch.test:{port}", **opts},
    )
    return MeilisearchKeywordLane(spec, LaneResources(http=session))


def _store(port: int, session: Any, **opts: Any) -> MeilisearchWriter:
    spec = LaneSpec(
        name="keyword",
        kind=LaneKind.KEYWORD,
        backend="meilisearch",
        options={"url": f"http://meilisearch.test:{port}", "task_timeout_s": 5, **opts},
    )
    return MeilisearchWriter(spec, LaneResources(http=session))


async def _ingest(port: int, session: Any, key: str = "") -> MeilisearchWriter:
    writer = _store(port, session, api_key=key)
    await writer.upsert(CHUNKS)
    return writer


class TestFilters:
    def test_quote_value_escapes(self) -> None:
        """Quotes and backslashes in values are escaped inside a double-quoted literal."""
        assert quote_value('a"b\\c') == '"a\\"b\\\\c"'

    def test_dates_and_sites(self) -> None:
        """Date bounds keep undated documents; sites become an IN list of quoted values."""
        c = BoundConstraints(date_from=datetime(2020, 1, 1, tzinfo=UTC), sites=("A.org", 'x" OR 1=1'))
        assert build_filter(c) == [
            "published_ts >= 1577836800 OR published_ts IS NULL",
            'domain IN ["a.org", "x\\" or 1=1"]',
        ]


class TestMeilisearchKeywordLane:
    async def test_ranking_score_is_the_hit_score(self) -> None:
        """Hits come back best first with _rankingScore as score and the original chunk id."""
        fake = FakeMeili()
        async with serve(fake.app()) as srv, guarded(["meilisearch.test"]) as session:
            await _ingest(srv.port, session)
            hits = await _lane(srv.port, session).search(LaneRequest(query="reciprocal rank fusion", top_k=5))
        assert hits[0].id == "d1#0"
        assert (hits[0].score, hits[0].rank, hits[0].doc_id) == (1.0, 1, "d1")
        assert hits[0].published_at == datetime(2024, 1, 1, tzinfo=UTC)
        assert fake.searches[0]["showRankingScore"] is True

    async def test_filters_applied_by_server(self) -> None:
        """A date bound drops old dated documents and keeps undated ones."""
        fake = FakeMeili()
        request = LaneRequest(query="rank", constraints=BoundConstraints(date_from=datetime(2020, 1, 1, tzinfo=UTC)))
        async with serve(fake.app()) as srv, guarded(["meilisearch.test"]) as session:
            await _ingest(srv.port, session)
            hits = await _lane(srv.port, session).search(request)
        assert sorted(h.id for h in hits) == ["d1#0", "d3#0"]

    async def test_injection_attempt_is_a_literal(self) -> None:
        """A site value crafted to break out of the literal matches nothing instead of everything."""
        fake = FakeMeili()
        request = LaneRequest(query="rank", constraints=BoundConstraints(sites=('a.org" OR domain = "b.org',)))
        async with serve(fake.app()) as srv, guarded(["meilisearch.test"]) as session:
            await _ingest(srv.port, session)
            hits = await _lane(srv.port, session).search(request)
        assert hits == []

    async def test_missing_index_unavailable(self) -> None:
        """index_not_found (nothing ingested) is LaneUnavailable, so the fallback lane runs."""
        async with serve(FakeMeili().app()) as srv, guarded(["meilisearch.test"]) as session:
            with pytest.raises(LaneUnavailable, match="not found"):
                await _lane(srv.port, session).search(LaneRequest(query="x"))

    async def test_bad_key_forbidden(self) -> None:
        """invalid_api_key (403) is a forbidden rejection."""
        fake = FakeMeili(master_key="secret")
        async with serve(fake.app()) as srv, guarded(["meilisearch.test"]) as session:
            await _ingest(srv.port, session, key="secret")
            with pytest.raises(LaneRejected, match="invalid_api_key") as err:
                await _lane(srv.port, session, api_key="wrong").search(LaneRequest(query="x"))
        assert err.value.failure == "forbidden"

    async def test_api_key_sent_as_bearer(self) -> None:
        """The configured key authorises the search."""
        fake = FakeMeili(master_key="secret")
        async with serve(fake.app()) as srv, guarded(["meilisearch.test"]) as session:
            await _ingest(srv.port, session, key="secret")
            hits = await _lane(srv.port, session, api_key="secret").search(LaneRequest(query="bm25"))
        assert [h.id for h in hits] == ["d2#0"]

    async def test_hung_server_times_out(self) -> None:
        """A hung search fails at timeout_s."""
        fake = FakeMeili()
        fake.hang = True
        async with serve(fake.app()) as srv, guarded(["meilisearch.test"]) as session:
            with pytest.raises(LaneTimeout):
                await _lane(srv.port, session, timeout_s=0.2).search(LaneRequest(query="x"))

    async def test_server_error_unavailable(self) -> None:
        """A 503 is LaneUnavailable."""
        fake = FakeMeili()
        fake.status_override = 503
        async with serve(fake.app()) as srv, guarded(["meilisearch.test"]) as session:
            with pytest.raises(LaneUnavailable):
                await _lane(srv.port, session).search(LaneRequest(query="x"))


def test_public_api() -> None:
    """The module exports the lane and its filter helpers."""
    assert set(mod.__all__) == {"BACKEND", "MeilisearchKeywordLane", "build_filter", "quote_value"}


class TestTenants:
    async def test_each_tenant_has_its_own_index(self, tmp_path: Path) -> None:
        """Over real HTTP: ``default`` keeps the ``chunks`` index, other tenants get ``chunks__<tenant>``; each
        tenant's lane searches only its index."""
        fake = FakeMeili()
        async with serve(fake.app()) as srv, guarded(["meilisearch.test"]) as session:
            mspec = LaneSpec(
                name="keyword",
                kind=LaneKind.KEYWORD,
                backend="meilisearch",
                options={"url": f"http://meilisearch.test:{srv.port}", "task_timeout_s": 5.0},
            )

            def of(tenant: str) -> LaneResources:
                return LaneResources(home=tenant_home(tmp_path, tenant), tenant=tenant, http=session)

            await write_as_each(lambda r: MeilisearchWriter(mspec, r), of, plain)
            assert await search_as_each(lambda r: MeilisearchKeywordLane(mspec, r), of) == own_ids()
        assert set(fake.indexes) == {"chunks", "chunks__acme", "chunks__beta"}
        assert len(fake.indexes["chunks__acme"]["docs"]) == 2
