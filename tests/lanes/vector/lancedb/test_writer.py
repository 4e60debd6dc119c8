"""Tests of the LanceDB store's writer: layout, idempotent merge-upserts, deletes, dimensions, the ANN index."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import lanes.vector.lancedb.writer as mod
from fabric.core.chunks import Chunk
from fabric.core.errors import IngestError
from fabric.core.models import LaneKind, LaneRequest, Trust
from lanes.vector.lancedb.lane import LanceVectorLane
from lanes.vector.lancedb.store import LanceOptions, connect, open_table
from lanes.vector.lancedb.writer import LanceWriter
from tests.support.embedded import BagEmbedder, chunk, resources, spec


def lspec(**options: Any) -> Any:
    """A spec of the lancedb backend with ``options``."""
    return spec(LaneKind.VECTOR, "lancedb", **options)


def embedded(chunks: list[Chunk], emb: BagEmbedder) -> list[Chunk]:
    """The chunks with their bag-of-words vectors."""
    vecs = emb.embed([c.embed_text for c in chunks])
    return [replace(c, vector=tuple(v)) for c, v in zip(chunks, vecs, strict=True)]


async def write(home: Path, chunks: list[Chunk], emb: BagEmbedder, **options: Any) -> dict[str, Any]:
    """Upsert ``chunks`` with a fresh writer, finish it, close it; what ``finish`` reported."""
    store = LanceWriter(lspec(**options), resources(home, emb))
    await store.open()
    try:
        await store.upsert(embedded(chunks, emb))
        return await store.finish()
    finally:
        await store.aclose()


def table(home: Path) -> Any:
    """The bag-64 table of ``home``."""
    folder = home / "vectors" / "lancedb"
    found = open_table(connect(folder), folder, "bag_64")
    assert found is not None
    return found


def corpus(n: int) -> list[Chunk]:
    """``n`` chunks of varied words, years 2000-2019, every fifth trusted."""
    return [
        chunk(f"c{i:04d}", f"w{i % 7} v{i % 11} u{i % 13} in {2000 + i % 20}", url=f"https://s{i % 3}.org/{i}",
              trust=Trust.TRUSTED if i % 5 == 0 else Trust.UNTRUSTED)
        for i in range(n)
    ]  # fmt: skip


class TestLayout:
    async def test_one_table_per_model_under_the_tenant_home(self, tmp_path: Path) -> None:
        """<home>/vectors/lancedb/<model slug>.lance; another tenant's under its own home; options.path moves it."""
        emb = BagEmbedder()
        await write(tmp_path, [chunk("a", "alpha")], emb)
        assert (tmp_path / "vectors" / "lancedb" / "bag_64.lance").is_dir()
        acme = LanceOptions.parse(lspec()).folder(resources(tmp_path, emb, tenant="acme"))
        assert acme == tmp_path / "tenants" / "acme" / "vectors" / "lancedb"
        assert LanceOptions.parse(lspec(path=str(tmp_path / "x"))).folder(resources(tmp_path)) == tmp_path / "x"

    async def test_chunks_without_vectors_create_nothing(self, tmp_path: Path) -> None:
        """Only chunks carrying a vector are written: a batch without any creates no table."""
        store = LanceWriter(lspec(), resources(tmp_path, BagEmbedder()))
        await store.open()
        await store.upsert([chunk("a", "alpha")])
        assert await store.ids() == set()
        assert await store.finish() == {"rows": 0, "built": False}
        await store.aclose()
        assert not (tmp_path / "vectors" / "lancedb" / "bag_64.lance").exists()


class TestWrites:
    async def test_reupsert_replaces_the_row(self, tmp_path: Path) -> None:
        """Writing an id again (twice in one batch too) keeps one row holding the last version."""
        emb = BagEmbedder()
        await write(tmp_path, [chunk("a", "alpha"), chunk("b", "beta")], emb)
        await write(tmp_path, [chunk("a", "first"), chunk("a", "alpha changed")], emb)
        rows = table(tmp_path).search().select(["id", "payload"]).limit(10).to_arrow().to_pylist()
        assert sorted(r["id"] for r in rows) == ["a", "b"]
        assert '"text":"alpha changed"' in next(r["payload"] for r in rows if r["id"] == "a")

    async def test_delete_ids_with_quotes_and_wildcards(self, tmp_path: Path) -> None:
        """Ids are quoted in the delete predicate: a quote, a backslash or a LIKE wildcard deletes exactly its row."""
        emb = BagEmbedder()
        ids = ["o'brien", "back\\slash", "per%cent", "under_score", "plain"]
        await write(tmp_path, [chunk(i, f"text {n}") for n, i in enumerate(ids)], emb)
        store = LanceWriter(lspec(), resources(tmp_path, emb))
        await store.delete(["o'brien", "back\\slash", "per%", "unknown"])
        assert await store.ids() == {"per%cent", "under_score", "plain"}
        await store.aclose()

    async def test_mixed_dimensions_are_refused(self, tmp_path: Path) -> None:
        """A vector of another dimension than the table's raises IngestError and writes nothing."""
        emb = BagEmbedder()
        await write(tmp_path, [chunk("a", "alpha")], emb)
        store = LanceWriter(lspec(), resources(tmp_path, emb))
        with pytest.raises(IngestError, match="dimensions"):
            await store.upsert([replace(chunk("b", "beta"), vector=(1.0, 0.0))])
        assert await store.ids() == {"a"}
        await store.aclose()


class TestIndex:
    async def test_below_the_threshold_no_index(self, tmp_path: Path) -> None:
        """Fewer rows than index_min_rows: finish compacts but builds nothing; the search is exact."""
        emb = BagEmbedder()
        assert await write(tmp_path, corpus(50), emb, index_min_rows=51) == {
            "rows": 50,
            "built": False,
            "indexed": False,
        }
        assert table(tmp_path).list_indices() == []

    async def test_finish_builds_the_ann_and_filter_indexes(self, tmp_path: Path) -> None:
        """At index_min_rows rows finish builds the vector index (cosine) and the filter columns' indexes; the lane
        then answers through them: a stored text's chunk first with its exact cosine, filters still exact."""
        emb = BagEmbedder()
        chunks = corpus(600)
        done = await write(tmp_path, chunks, emb, index_min_rows=600)
        assert done == {"rows": 600, "built": True, "index": "IVF_HNSW_SQ"}
        kinds = {ix.columns[0]: ix.index_type for ix in table(tmp_path).list_indices()}
        assert kinds == {"vector": "IvfHnswSq", "years": "LabelList", "trust": "Bitmap", "domain": "BTree"}
        async with LanceVectorLane(lspec(trust="trusted"), resources(tmp_path, emb)) as lane:
            hits = await lane.search(LaneRequest(query=chunks[35].embed_text, top_k=5))
        assert hits[0].id == "c0035"
        assert hits[0].score == pytest.approx(1.0, abs=1e-5)
        assert all(h.trust is Trust.TRUSTED for h in hits)

    async def test_ivf_pq_on_request(self, tmp_path: Path) -> None:
        """index_type = IVF_PQ builds that index instead."""
        done = await write(tmp_path, corpus(600), BagEmbedder(), index_min_rows=10, index_type="ivf_pq")
        assert done["index"] == "IVF_PQ"
        assert "IvfPq" in {ix.index_type for ix in table(tmp_path).list_indices()}

    async def test_rows_written_after_the_index_are_searched_then_merged(self, tmp_path: Path) -> None:
        """Rows added after the index are found at once (searched beside it) and merged into it by the next
        finish, which builds no second index."""
        emb = BagEmbedder()
        await write(tmp_path, corpus(600), emb, index_min_rows=600)
        new = chunk("new", "zebra quagga okapi")
        store = LanceWriter(lspec(index_min_rows=600), resources(tmp_path, emb))
        await store.upsert(embedded([new], emb))
        (vector_index,) = [ix for ix in table(tmp_path).list_indices() if ix.columns == ["vector"]]
        assert vector_index.num_unindexed_rows == 1
        async with LanceVectorLane(lspec(), resources(tmp_path, emb)) as lane:
            assert (await lane.search(LaneRequest(query="zebra quagga okapi", top_k=1)))[0].id == "new"
        assert await store.finish() == {"rows": 601, "built": False, "indexed": True}
        await store.aclose()
        (vector_index,) = [ix for ix in table(tmp_path).list_indices() if ix.columns == ["vector"]]
        assert (vector_index.num_indexed_rows, vector_index.num_unindexed_rows) == (601, 0)


def test_public_api() -> None:
    """The module exports the writer; it is the lancedb backend's declared writer."""
    from lanes.registry import descriptor

    assert mod.__all__ == ["LanceWriter"]
    assert descriptor("lancedb").writer is LanceWriter


async def test_ingest_writes_the_configured_backend(tmp_path: Path) -> None:
    """With ``lanes.vector.backend = "lancedb"`` ingestion builds this writer, fills the table, and the store agrees
    with the ledger (``fabric check``); the lane built from the same settings finds the note."""
    from fabric.ingest.check import check_stores
    from fabric.ingest.pipeline import ingest
    from fabric.ingest.writers import build_writers
    from fabric.query.lane_setup import build_lanes
    from fabric.settings import load_settings

    settings = load_settings(env={"FABRIC__lanes__vector__backend": "lancedb"}, user_file=None)
    emb = BagEmbedder()
    res = resources(tmp_path / "home", emb)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("# Quagga\n\nThe quagga is an extinct zebra.\n")
    writers = build_writers(settings, res)
    assert [w.store for w in writers if w.needs_vectors] == ["lancedb"]
    try:
        report = await ingest(tmp_path / "notes", home=res.home, writers=writers, embedder=emb)
        assert report.stores["lancedb"] == "ok"
        assert (await check_stores(res.home, writers)).agree
    finally:
        for w in writers:
            await w.aclose()
    lanes, errors = build_lanes(settings, res)
    assert (errors, type(lanes["vector"])) == ({}, LanceVectorLane)
    hits = await lanes["vector"].search(LaneRequest(query="quagga zebra", top_k=3))
    assert [h.title for h in hits] == ["Quagga"]
    for lane in lanes.values():
        await lane.aclose()
