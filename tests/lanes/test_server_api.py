"""Public API of the server-backend helper modules (every module defines ``__all__``)."""

from __future__ import annotations

import lanes._options
import lanes.graph.arango.writer
import lanes.keyword.meilisearch.writer
import lanes.server_records
import lanes.web._common
from fabric.core.chunks import StoreWriter
from fabric.core.models import LaneKind
from lanes.base import LaneResources, LaneSpec


class TestPublicApi:
    def test_store_modules(self) -> None:
        """The store modules export their writer classes and constants."""
        assert set(lanes.keyword.meilisearch.writer.__all__) == {
            "INDEX_SETTINGS",
            "MeiliOptions",
            "MeilisearchWriter",
            "meili_request",
        }
        assert set(lanes.graph.arango.writer.__all__) == {
            "COLLECTIONS",
            "ArangoGraphWriter",
            "ArangoOptions",
            "connect",
            "entity_key",
            "map_arango_error",
        }

    def test_helpers(self) -> None:
        """Helper modules export their documented names."""
        assert set(lanes.server_records.__all__) == {
            "ID_NAMESPACE",
            "chunk_key",
            "chunk_record",
            "record_hit",
            "simhash_of",
        }
        assert lanes._options.__all__ == ["LaneOptions"]
        assert "normalise_url" in lanes.web._common.__all__

    def test_stores_satisfy_protocol(self) -> None:
        """Both server stores are StoreWriters (checked at runtime) and need no vectors."""
        meili = lanes.keyword.meilisearch.writer.MeilisearchWriter(
            LaneSpec(name="keyword", kind=LaneKind.KEYWORD, backend="meilisearch", options={"url": "http://m:7700"}),
            LaneResources(),
        )
        arango = lanes.graph.arango.writer.ArangoGraphWriter(
            LaneSpec(name="graph", kind=LaneKind.GRAPH, backend="arango", options={"url": "http://a:8529"}),
            LaneResources(),
        )
        assert all(isinstance(s, StoreWriter) and not s.needs_vectors for s in (meili, arango))


class TestDeterministicIds:
    def test_key_is_stable_and_safe(self) -> None:
        """chunk_key is a pure function of the id (and model), 32 hex chars."""
        key = lanes.server_records.chunk_key("doc:a.md#intro-1")
        assert (key, len(key), key.isalnum()) == (lanes.server_records.chunk_key("doc:a.md#intro-1"), 32, True)
        assert lanes.server_records.chunk_key("x", "minilm") != lanes.server_records.chunk_key("x")
