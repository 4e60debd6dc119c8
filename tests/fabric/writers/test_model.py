"""The chunk and store-writer contract: the embedded text and the SimHash storage codec."""

from __future__ import annotations

from pathlib import Path

import fabric.writers.model as mod
from fabric.models import LaneKind


def test_embed_text_is_title_and_body() -> None:
    """What is embedded is the title and the text, as BEIR evaluations do."""
    chunk = mod.Chunk(id="d#0", doc_id="d", chunk_id="0", title="Title", text="Body.")
    assert chunk.embed_text == "Title Body."
    assert mod.Chunk(id="x", doc_id="x", chunk_id="0", title="", text="Only").embed_text == "Only"


def test_simhash_storage_round_trip() -> None:
    """An unsigned 64-bit SimHash is stored signed and read back unsigned; non-integers read as None."""
    for value in (0, 5, (1 << 63) - 1, 1 << 63, (1 << 64) - 1):
        stored = mod.to_stored_simhash(value)
        assert stored is not None
        assert -(1 << 63) <= stored < 1 << 63
        assert mod.from_stored_simhash(stored) == value
    assert (mod.to_stored_simhash(None), mod.from_stored_simhash("12"), mod.from_stored_simhash(True)) == (
        None,
        None,
        None,
    )


def test_public_api() -> None:
    """The module exports the chunk, the writer protocols and the codec."""
    assert set(mod.__all__) == {
        "Chunk",
        "ListableStore",
        "StoreWriter",
        "Triple",
        "TripleReader",
        "from_stored_simhash",
        "to_stored_simhash",
    }


def test_embedded_and_qdrant_writers_can_list_their_ids(tmp_path: Path) -> None:
    """``fabric check`` compares the ids of the stores that list them: the embedded ones and Qdrant do."""
    from lanes.graph.sqlite_writer import SqliteGraphWriter
    from lanes.keyword.sqlite_fts_writer import SqliteFtsWriter
    from lanes.vector.numpy_flat_writer import FlatVectorWriter
    from lanes.vector.qdrant_writer import QdrantWriter
    from tests.support.embedded import resources, spec

    res = resources(tmp_path)
    writers = [
        SqliteFtsWriter(spec(LaneKind.KEYWORD, "sqlite_fts"), res),
        FlatVectorWriter(spec(LaneKind.VECTOR, "numpy_flat"), res),
        SqliteGraphWriter(spec(LaneKind.GRAPH, "sqlite_graph"), res),
        QdrantWriter(spec(LaneKind.VECTOR, "qdrant"), res),
    ]
    assert all(isinstance(w, mod.ListableStore) for w in writers)
