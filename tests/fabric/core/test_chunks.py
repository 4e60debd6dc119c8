"""The chunk and store-writer contract: the embedded text and the SimHash storage codec."""

from __future__ import annotations

from pathlib import Path

import fabric.core.chunks as mod
from fabric.core.models import LaneKind


def test_embed_text_is_title_and_body() -> None:
    """What is embedded is the title and the text, as BEIR evaluations do."""
    chunk = mod.Chunk(id="d#0", doc_id="d", chunk_id="0", title="Title", text="Body.")
    assert chunk.embed_text == "Title Body."
    assert mod.Chunk(id="x", doc_id="x", chunk_id="0", title="", text="Only").embed_text == "Only"


def test_simhash_storage_round_trip() -> None:
    """A SimHash is stored as 16 hex digits in every store and read back unchanged."""
    for value in (0, 5, 4837, (1 << 63) - 1, 1 << 63, (1 << 64) - 1):
        stored = mod.to_stored_simhash(value)
        assert stored == f"{value:016x}"
        assert mod.from_stored_simhash(stored) == value
    assert mod.to_stored_simhash(4837) == "00000000000012e5"  # what an INTEGER column would read as 1200000
    assert mod.to_stored_simhash(None) is None


def test_simhash_reader_accepts_the_former_signed_form() -> None:
    """Homes written before (Qdrant, numpy_flat payloads) hold signed 64-bit integers; they read as before."""
    for value in (0, 5, (1 << 63) - 1, 1 << 63, (1 << 64) - 1):
        signed = value - (1 << 64) if value >= 1 << 63 else value
        assert mod.from_stored_simhash(signed) == value


def test_simhash_reader_refuses_what_is_no_signature() -> None:
    """Absent values, booleans, non-hex text and numbers outside 64 bits read as None (fusion computes them)."""
    for value in (None, True, "x", "", 1.5, 1 << 64, -(1 << 63) - 1, f"{1 << 64:x}", "-1"):
        assert mod.from_stored_simhash(value) is None, value


def test_public_api() -> None:
    """The module exports the chunk, the writer protocols and the codec."""
    assert set(mod.__all__) == {
        "Chunk",
        "FinishingStore",
        "ListableStore",
        "PrefetchingStore",
        "StoreWriter",
        "Triple",
        "TripleReader",
        "from_stored_simhash",
        "to_stored_simhash",
    }


def test_embedded_and_qdrant_writers_can_list_their_ids(tmp_path: Path) -> None:
    """``fabric check`` compares the ids of the stores that list them: the embedded ones and Qdrant do."""
    from lanes.graph.sqlite_graph.writer import SqliteGraphWriter
    from lanes.keyword.sqlite_fts.writer import SqliteFtsWriter
    from lanes.vector.numpy_flat.writer import FlatVectorWriter
    from lanes.vector.qdrant.writer import QdrantWriter
    from tests.support.embedded import resources, spec

    res = resources(tmp_path)
    writers = [
        SqliteFtsWriter(spec(LaneKind.KEYWORD, "sqlite_fts"), res),
        FlatVectorWriter(spec(LaneKind.VECTOR, "numpy_flat"), res),
        SqliteGraphWriter(spec(LaneKind.GRAPH, "sqlite_graph"), res),
        QdrantWriter(spec(LaneKind.VECTOR, "qdrant"), res),
    ]
    assert all(isinstance(w, mod.ListableStore) for w in writers)
    # work after an ingest: the flat vector store's search graph, the SQLite graph's deferred indexes
    assert [isinstance(w, mod.FinishingStore) for w in writers] == [False, True, True, False]
    assert [isinstance(w, mod.PrefetchingStore) for w in writers] == [False, False, True, False]
