"""Tests of the Qdrant vector store and lane (local mode in tmp_path; a loopback server for HTTP errors)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp import web

import lanes.vector.qdrant.lane as mod
from fabric.core.errors import LaneRejected, LaneUnavailable
from fabric.core.models import BoundConstraints, LaneKind, LaneRequest, Trust
from lanes.base import LaneResources
from lanes.vector.qdrant.lane import QdrantVectorLane
from lanes.vector.qdrant.writer import QdrantWriter
from tests.lanes.vector.fake_qdrant import FakeQdrant
from tests.support.embedded import BagEmbedder, chunk, resources, spec
from tests.support.http import serve
from tests.support.tenants import embedded, own_ids, search_as_each, write_as_each
from tools.faultproxy import Fault, FaultProxy

VSPEC = spec(LaneKind.VECTOR, "qdrant")


async def _write(home: Path, chunks, embedder) -> None:
    vecs = embedder.embed([c.embed_text for c in chunks])
    store = QdrantWriter(VSPEC, resources(home, embedder))
    await store.open()
    await store.upsert([c.__class__(**{**_fields(c), "vector": tuple(v)}) for c, v in zip(chunks, vecs, strict=True)])
    await store.aclose()


def _fields(c) -> dict:
    return {f: getattr(c, f) for f in c.__dataclass_fields__}


@pytest.fixture
def embedder() -> BagEmbedder:
    """The deterministic bag-of-words embedder."""
    return BagEmbedder()


class TestSearch:
    async def test_nearest_chunk_first(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """The chunk sharing the query's words ranks first with a cosine score."""
        await _write(tmp_path, [chunk("a", "apple banana"), chunk("b", "car engine wheel")], embedder)
        async with QdrantVectorLane(VSPEC, resources(tmp_path, embedder)) as lane:
            hits = await lane.search(LaneRequest(query="banana apple", top_k=2))
        assert [h.id for h in hits] == ["a", "b"]
        assert hits[0].rank == 1
        assert hits[0].score == pytest.approx(1.0, abs=1e-5)

    async def test_hits_carry_ingest_features(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """Points keep the SimHash (signed in the payload), URL key and title key; hits return them unchanged."""
        chunks = [chunk(f"c{i}", f"apple banana text number {i} " * 3, title=f"Fruit {i}") for i in range(12)]
        chunks.append(chunk("u", "apple banana page", title="Page", url="https://www.site.org/p/?utm_source=x"))
        await _write(tmp_path, chunks, embedder)
        async with QdrantVectorLane(VSPEC, resources(tmp_path, embedder)) as lane:
            hits = await lane.search(LaneRequest(query="apple banana", top_k=20))
        stored = {c.id: (c.simhash, c.url_key, c.title_key) for c in chunks}
        assert {h.id: (h.simhash, h.url_key, h.title_key) for h in hits} == stored
        assert any(sig >= 1 << 63 for sig, _, _ in stored.values() if sig is not None)
        assert stored["u"][1] == "site.org/p"

    async def test_no_embedder_is_unavailable(self, tmp_path: Path) -> None:
        """Without an embedder the lane raises LaneUnavailable (the executor falls back to keyword)."""
        lane = QdrantVectorLane(VSPEC, resources(tmp_path, None))
        with pytest.raises(LaneUnavailable):
            await lane.search(LaneRequest(query="x"))

    async def test_missing_collection_returns_nothing(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """Before any ingestion the lane answers with no hits."""
        async with QdrantVectorLane(VSPEC, resources(tmp_path, embedder)) as lane:
            assert await lane.search(LaneRequest(query="x")) == []

    async def test_year_filter_fills_top_k_from_deep_ranks(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """With a year range, top_k is filled by in-range chunks even when they rank below 30 others."""
        near = [chunk(f"n{i}", "alpha beta gamma delta") for i in range(30)]
        far = [chunk(f"y{i}", f"alpha report of {2019 + i % 2}") for i in range(5)]
        await _write(tmp_path, near + far, embedder)
        c = BoundConstraints(date_from=datetime(2019, 1, 1, tzinfo=UTC), date_to=datetime(2020, 12, 31, tzinfo=UTC))
        async with QdrantVectorLane(VSPEC, resources(tmp_path, embedder)) as lane:
            hits = await lane.search(LaneRequest(query="alpha beta gamma delta", top_k=5, constraints=c))
        assert sorted(h.id for h in hits) == [f"y{i}" for i in range(5)]

    async def test_query_years_put_dated_chunks_outside_them_last(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """Inferred years keep undated and in-range chunks first; one published outside still fills the answer."""
        docs = [
            chunk("out", "alpha beta report of 2005", published_at=datetime(2005, 3, 1, tzinfo=UTC)),
            chunk("undated", "alpha beta gamma"),
            chunk("in", "alpha", published_at=datetime(2019, 3, 1, tzinfo=UTC)),
        ]
        await _write(tmp_path, docs, embedder)
        c = BoundConstraints(query_years=(2019, 2019))
        async with QdrantVectorLane(VSPEC, resources(tmp_path, embedder)) as lane:
            hits = await lane.search(LaneRequest(query="alpha beta report of 2005", top_k=3, constraints=c))
        assert [h.id for h in hits][-1] == "out"
        assert [h.rank for h in hits] == [1, 2, 3]

    async def test_filled_hits_never_outscore_preferred_ones(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """A hit filled from the unfiltered ranking scores no higher than the preferred hits above it."""
        old = datetime(2005, 3, 1, tzinfo=UTC)
        docs = [chunk("out", "alpha beta gamma", published_at=old), chunk("undated", "alpha zeta")]
        await _write(tmp_path, docs, embedder)
        c = BoundConstraints(query_years=(2019, 2019))
        async with QdrantVectorLane(VSPEC, resources(tmp_path, embedder)) as lane:
            hits = await lane.search(LaneRequest(query="alpha beta gamma", top_k=2, constraints=c))
        assert [h.id for h in hits] == ["undated", "out"]
        assert hits[1].score <= hits[0].score

    async def test_query_years_never_empty_the_answer(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """When every chunk is published outside the inferred years, the unfiltered ranking still answers."""
        old = datetime(2005, 3, 1, tzinfo=UTC)
        docs = [chunk("a", "alpha report", published_at=old), chunk("b", "beta report", published_at=old)]
        await _write(tmp_path, docs, embedder)
        c = BoundConstraints(query_years=(1979, 1979))
        async with QdrantVectorLane(VSPEC, resources(tmp_path, embedder)) as lane:
            hits = await lane.search(LaneRequest(query="alpha report", top_k=5, constraints=c))
        assert [h.id for h in hits] == ["a", "b"]

    async def test_query_years_ignore_years_a_text_only_mentions(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """A year the text mentions does not date an undated chunk: the ranking is unchanged."""
        await _write(tmp_path, [chunk("a", "alpha beta report of 2005"), chunk("b", "alpha gamma")], embedder)
        c = BoundConstraints(query_years=(1979, 1979))
        async with QdrantVectorLane(VSPEC, resources(tmp_path, embedder)) as lane:
            hits = await lane.search(LaneRequest(query="alpha beta report", top_k=5, constraints=c))
        assert [h.id for h in hits] == ["a", "b"]

    async def test_site_filter_pages_deeper(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """A site filter (checked on payloads) pages past non-matching neighbours to fill top_k."""
        near = [chunk(f"n{i}", "alpha beta", url=f"https://other{i}.com/") for i in range(80)]
        far = [chunk(f"s{i}", "alpha", url="https://docs.example.org/p") for i in range(3)]
        await _write(tmp_path, near + far, embedder)
        c = BoundConstraints(sites=("example.org",))
        async with QdrantVectorLane(VSPEC, resources(tmp_path, embedder)) as lane:
            hits = await lane.search(LaneRequest(query="alpha beta", top_k=3, constraints=c))
        assert sorted(h.id for h in hits) == ["s0", "s1", "s2"]

    async def test_trust_option_filters(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """options.trust keeps only chunks of that trust."""
        await _write(tmp_path, [chunk("u", "alpha"), chunk("t", "alpha", trust=Trust.TRUSTED)], embedder)
        lane_spec = spec(LaneKind.VECTOR, "qdrant", trust="trusted")
        async with QdrantVectorLane(lane_spec, resources(tmp_path, embedder)) as lane:
            assert [h.id for h in await lane.search(LaneRequest(query="alpha"))] == ["t"]


@pytest.fixture
async def failing_qdrant() -> AsyncIterator[str]:
    """A loopback HTTP server answering every Qdrant REST call with 503."""

    async def fail(request: web.Request) -> web.Response:
        return web.json_response({"status": {"error": "down"}}, status=503)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fail)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


class TestServerMode:
    async def test_server_5xx_is_unavailable(self, tmp_path: Path, failing_qdrant: str) -> None:
        """With options.url the lane talks HTTP to the server, and a 503 maps to LaneUnavailable."""
        lane_spec = spec(LaneKind.VECTOR, "qdrant", url=failing_qdrant)
        async with QdrantVectorLane(lane_spec, resources(tmp_path, BagEmbedder())) as lane:
            with pytest.raises(LaneUnavailable):
                await lane.search(LaneRequest(query="alpha"))


class TestRateLimit:
    async def test_429_suspends_for_retry_after(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """A 429 with Retry-After (the fault proxy in front of the stand-in) is LaneRejected carrying it."""
        async with serve(FakeQdrant().app()) as srv, FaultProxy(f"http://127.0.0.1:{srv.port}") as proxy:
            proxy.arm(Fault.RATE_LIMITED, retry_after_s=42)
            async with QdrantVectorLane(
                spec(LaneKind.VECTOR, "qdrant", url=proxy.url), resources(tmp_path, embedder)
            ) as lane:
                with pytest.raises(LaneRejected) as caught:
                    await lane.search(LaneRequest(query="alpha"))
        assert caught.value.failure == "rate_limited"
        assert caught.value.suspend_s == 42.0


def test_public_api() -> None:
    """The module exports exactly the lane."""
    assert mod.__all__ == ["BACKEND", "QdrantVectorLane"]


class TestTenants:
    async def test_local_mode_keeps_a_store_per_tenant(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """Local mode: each tenant's points live in its own folder (and collection); searches never cross."""

        def of(tenant: str) -> LaneResources:
            return resources(tmp_path, embedder, tenant=tenant)

        await write_as_each(lambda r: QdrantWriter(VSPEC, r), of, embedded(embedder))
        assert await search_as_each(lambda r: QdrantVectorLane(VSPEC, r), of) == own_ids()
        assert (tmp_path / "qdrant").is_dir()
        assert (tmp_path / "tenants" / "beta" / "qdrant").is_dir()

    async def test_server_mode_keeps_a_collection_per_tenant(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """Server mode over real HTTP: ``default`` keeps ``chunks_<model>``, other tenants get
        ``chunks_<model>__<tenant>``; each tenant's lane queries only its collection."""
        fake = FakeQdrant()
        async with serve(fake.app()) as srv:
            qspec = spec(LaneKind.VECTOR, "qdrant", url=f"http://127.0.0.1:{srv.port}")

            def of(tenant: str) -> LaneResources:
                return resources(tmp_path, embedder, tenant=tenant)

            await write_as_each(lambda r: QdrantWriter(qspec, r), of, embedded(embedder))
            assert await search_as_each(lambda r: QdrantVectorLane(qspec, r), of) == own_ids()
        assert set(fake.collections) == {"chunks_bag_64", "chunks_bag_64__acme", "chunks_bag_64__beta"}
        assert len(fake.collections["chunks_bag_64__acme"]["points"]) == 2
