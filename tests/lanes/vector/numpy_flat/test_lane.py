"""Tests of the flat vector lane: hits from the store, request constraints as pre-top-k filters, errors."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

import lanes.vector.numpy_flat.lane as mod
from fabric.core.errors import ConfigError, LaneBadResponse, LaneUnavailable
from fabric.core.models import BoundConstraints, LaneKind, LaneRequest, Trust
from lanes.base import LaneResources
from lanes.registry import resolve
from lanes.vector.numpy_flat.lane import FlatVectorLane, vector_filter
from lanes.vector.numpy_flat.store import TRUST_CODES
from lanes.vector.numpy_flat.writer import FlatVectorWriter
from tests.lanes.vector.numpy_flat.test_writer import VSPEC, write
from tests.support.embedded import BagEmbedder, chunk, resources, spec
from tests.support.tenants import embedded, own_ids, search_as_each, write_as_each


class TestSearch:
    async def test_nearest_chunk_first_with_payload(self, tmp_path: Path) -> None:
        """The chunk sharing the query's words ranks first; hits carry the stored payload and features."""
        emb = BagEmbedder()
        chunks = [
            chunk("a", "apple banana", title="Fruit", url="https://www.site.org/p/?utm_source=x"),
            chunk("b", "car engine wheel", published_at=datetime(2021, 3, 1, tzinfo=UTC)),
        ]
        await write(tmp_path, chunks, emb)
        async with FlatVectorLane(VSPEC, resources(tmp_path, emb)) as lane:
            hits = await lane.search(LaneRequest(query="banana apple", top_k=2))
        assert [(h.id, h.rank) for h in hits] == [("a", 1), ("b", 2)]
        q, a = emb.embed(["banana apple", chunks[0].embed_text])
        assert hits[0].score == pytest.approx(sum(x * y for x, y in zip(q, a, strict=True)), abs=1e-5)
        assert (hits[0].title, hits[0].domain, hits[0].url_key) == ("Fruit", "site.org", "site.org/p")
        assert hits[0].simhash == chunks[0].simhash
        assert hits[1].published_at == datetime(2021, 3, 1, tzinfo=UTC)
        assert hits[1].metadata["years"] == [2021]

    async def test_date_range_and_trust_option_filter_before_top_k(self, tmp_path: Path) -> None:
        """With a year range and trust = trusted, top_k fills from the rows passing both."""
        emb = BagEmbedder()
        near = [chunk(f"n{i:02d}", "alpha beta gamma", trust=Trust.TRUSTED) for i in range(20)]
        far = [chunk("old", "alpha in 2019"), chunk("ok", "alpha in 2019", trust=Trust.TRUSTED)]
        await write(tmp_path, near + far, emb)
        c = BoundConstraints(date_from=datetime(2019, 1, 1, tzinfo=UTC), date_to=datetime(2019, 12, 31, tzinfo=UTC))
        trusted = spec(LaneKind.VECTOR, "numpy_flat", trust="trusted")
        async with FlatVectorLane(trusted, resources(tmp_path, emb)) as lane:
            hits = await lane.search(LaneRequest(query="alpha beta gamma", top_k=3, constraints=c))
        assert [h.id for h in hits] == ["ok"]

    async def test_before_ingestion_nothing(self, tmp_path: Path) -> None:
        """Without a store file the lane answers with no hits."""
        async with FlatVectorLane(VSPEC, resources(tmp_path, BagEmbedder())) as lane:
            assert await lane.search(LaneRequest(query="x")) == []

    async def test_empty_query_or_zero_top_k(self, tmp_path: Path) -> None:
        """A blank query or top_k 0 returns nothing without encoding."""
        emb = BagEmbedder()
        lane = FlatVectorLane(VSPEC, resources(tmp_path, emb))
        assert await lane.search(LaneRequest(query="  ")) == []
        assert await lane.search(LaneRequest(query="x", top_k=0)) == []
        assert emb.calls == 0


class TestErrors:
    async def test_no_embedder_is_unavailable(self, tmp_path: Path) -> None:
        """Without an embedder the lane raises LaneUnavailable (the executor falls back to keyword)."""
        with pytest.raises(LaneUnavailable):
            await FlatVectorLane(VSPEC, resources(tmp_path, None)).search(LaneRequest(query="x"))

    async def test_dimension_mismatch_is_a_bad_response(self, tmp_path: Path) -> None:
        """A store written with another model's dimension gives LaneBadResponse, not a traceback."""
        await write(tmp_path, [chunk("a", "alpha")], BagEmbedder())

        class Small(BagEmbedder):
            dim = 8

            def embed(self, texts):  # type: ignore[no-untyped-def]
                return [[1.0] + [0.0] * 7 for _ in texts]

        async with FlatVectorLane(VSPEC, resources(tmp_path, Small())) as lane:
            with pytest.raises(LaneBadResponse, match="dimension"):
                await lane.search(LaneRequest(query="alpha"))

    async def test_corrupt_file_is_unavailable(self, tmp_path: Path) -> None:
        """A store file that is not SQLite makes the lane unavailable."""
        path = tmp_path / "vectors" / "bag_64.sqlite"
        path.parent.mkdir()
        path.write_bytes(b"not a database" * 100)
        with pytest.raises(LaneUnavailable):
            await FlatVectorLane(VSPEC, resources(tmp_path, BagEmbedder())).open()

    def test_unknown_trust_option(self, tmp_path: Path) -> None:
        """An unknown trust option is a ConfigError naming the valid values."""
        with pytest.raises(ConfigError, match="trusted"):
            FlatVectorLane(spec(LaneKind.VECTOR, "numpy_flat", trust="gold"), resources(tmp_path))


def test_vector_filter_of_constraints() -> None:
    """Date bounds become years; sites and the trust option pass through."""
    c = BoundConstraints(date_from=datetime(2018, 5, 1, tzinfo=UTC), sites=("a.org",))
    flt = vector_filter(c, "trusted")
    assert (flt.year_from, flt.year_to, flt.trust, flt.sites) == (2018, None, TRUST_CODES["trusted"], ("a.org",))


def test_registered_as_numpy_flat() -> None:
    """The registry resolves backend numpy_flat to this lane; the module exports it."""
    assert resolve("numpy_flat") is FlatVectorLane
    assert mod.__all__ == ["BACKEND", "FlatVectorLane", "vector_filter"]
    assert mod.BACKEND.writer is FlatVectorWriter


class TestTenants:
    async def test_each_tenant_searches_only_its_own_vectors(self, tmp_path: Path) -> None:
        """Each tenant's nearest neighbours come from its own vector file only."""
        embedder = BagEmbedder()
        fspec = spec(LaneKind.VECTOR, "numpy_flat")

        def of(tenant: str) -> LaneResources:
            return resources(tmp_path, embedder, tenant=tenant)

        await write_as_each(lambda r: FlatVectorWriter(fspec, r), of, embedded(embedder))
        assert await search_as_each(lambda r: FlatVectorLane(fspec, r), of) == own_ids()
        assert (tmp_path / "vectors" / "bag_64.sqlite").is_file()
        assert (tmp_path / "tenants" / "acme" / "vectors" / "bag_64.sqlite").is_file()
