"""QdrantWriter: deterministic point ids, idempotent upserts, deletes, a local folder shared with the lane."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import lanes.vector.qdrant.writer as mod
from fabric.core.models import LaneRequest
from lanes.vector.qdrant.lane import QdrantVectorLane
from lanes.vector.qdrant.writer import QdrantWriter, point_id
from tests.lanes.vector.qdrant import test_lane as lane_tests
from tests.lanes.vector.qdrant.test_lane import VSPEC, _write
from tests.support.embedded import BagEmbedder, chunk, resources

embedder = lane_tests.embedder
"""The deterministic bag-of-words embedder (a fixture)."""


class TestStore:
    def test_point_ids_are_deterministic_per_model(self) -> None:
        """Point ids are UUIDv5 of doc id, chunk id and model."""
        assert point_id("d", "c", "m") == point_id("d", "c", "m")
        assert point_id("d", "c", "m") != point_id("d", "c", "m2")

    async def test_reupsert_does_not_duplicate(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """Upserting the same chunk twice leaves one point."""
        await _write(tmp_path, [chunk("a", "alpha")], embedder)
        await _write(tmp_path, [chunk("a", "alpha")], embedder)
        async with QdrantVectorLane(VSPEC, resources(tmp_path, embedder)) as lane:
            assert len(await lane.search(LaneRequest(query="alpha", top_k=10))) == 1

    async def test_delete_removes_points(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """Deleted chunk ids disappear from search."""
        await _write(tmp_path, [chunk("a", "alpha"), chunk("b", "alpha beta")], embedder)
        store = QdrantWriter(VSPEC, resources(tmp_path, embedder))
        await store.delete(["a"])
        await store.aclose()
        async with QdrantVectorLane(VSPEC, resources(tmp_path, embedder)) as lane:
            assert [h.id for h in await lane.search(LaneRequest(query="alpha"))] == ["b"]

    async def test_ids_lists_every_chunk_id(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """``ids`` pages through the collection (fabric check): empty before, the chunk ids after, less a delete."""
        store = QdrantWriter(VSPEC, resources(tmp_path, embedder))
        assert await store.ids() == set()
        await store.aclose()
        await _write(tmp_path, [chunk(f"c{i}", f"text {i}") for i in range(5)], embedder)
        store = QdrantWriter(VSPEC, resources(tmp_path, embedder))
        assert await store.ids() == {f"c{i}" for i in range(5)}
        await store.delete(["c2"])
        assert await store.ids() == {"c0", "c1", "c3", "c4"}
        await store.aclose()

    async def test_store_and_lane_share_the_local_folder(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """An open lane and a writer on the same path coexist in one process despite the folder lock."""
        await _write(tmp_path, [chunk("a", "alpha")], embedder)
        async with QdrantVectorLane(VSPEC, resources(tmp_path, embedder)) as lane:
            await _write(tmp_path, [chunk("b", "alpha beta")], embedder)
            assert {h.id for h in await lane.search(LaneRequest(query="alpha"))} == {"a", "b"}


def test_collection_name_from_model_or_option() -> None:
    """The collection is ``chunks_<model slug>`` unless ``options.collection`` names one."""
    assert mod.collection_name(VSPEC, "BAAI/bge-small") == "chunks_baai_bge_small"
    named = dataclasses.replace(VSPEC, options={"collection": "mine"})
    assert mod.collection_name(named, "any") == "mine"


def test_public_api() -> None:
    """The module exports the writer and the client helpers the lane shares."""
    assert {"QdrantWriter", "acquire_client", "collection_name", "map_qdrant_error", "release_client"} <= set(
        mod.__all__
    )
