"""The server writers' shared helpers: deterministic keys, the record of a chunk, and its hit read back."""

from __future__ import annotations

from datetime import UTC, datetime

import lanes.server_records as mod
from fabric.core.chunks import Chunk
from fabric.core.models import SourceKind, Trust

CHUNK = Chunk(
    id="d1#0", doc_id="d1", chunk_id="0", title="Fusion", text="Reciprocal rank fusion.", url="https://a.org/f",
    domain="a.org", published_at=datetime(2024, 1, 2, tzinfo=UTC), source_kind=SourceKind.OPERATOR,
    trust=Trust.TRUSTED, quality=0.75, simhash=(1 << 63) + 5, url_key="a.org/f", title_key="fusion",
)  # fmt: skip


def test_chunk_key_is_deterministic_and_store_safe() -> None:
    """Same id (and model) → same 32-hex key; another model → another key."""
    key = mod.chunk_key("d1#0")
    assert (key, len(key), key.isalnum()) == (mod.chunk_key("d1#0"), 32, True)
    assert mod.chunk_key("d1#0", "m") != key


def test_record_round_trips_to_a_hit() -> None:
    """record_hit reads back what chunk_record wrote: payload, provenance, date and dedup features."""
    record = mod.chunk_record(CHUNK)
    assert record["simhash"] == f"{(1 << 63) + 5:016x}"
    hit = mod.record_hit(record, rank=2, score=0.5, source_ref="store:x", graph_hops=1)
    assert (hit.id, hit.doc_id, hit.rank, hit.score, hit.graph_hops) == ("d1#0", "d1", 2, 0.5, 1)
    assert (hit.title, hit.url, hit.domain, hit.published_at) == ("Fusion", CHUNK.url, "a.org", CHUNK.published_at)
    assert (hit.source_kind, hit.trust, hit.quality, hit.simhash) == (
        SourceKind.OPERATOR,
        Trust.TRUSTED,
        0.75,
        CHUNK.simhash,
    )
    assert (hit.url_key, hit.title_key, hit.source_ref) == ("a.org/f", "fusion", "store:x")


def test_sparse_record_gets_defaults() -> None:
    """Missing or unknown fields fall back to safe defaults and the given source_ref."""
    hit = mod.record_hit({"_key": "k", "source_kind": "nonsense", "quality": True}, rank=1, score=0.0, source_ref="s")
    assert (hit.id, hit.source_kind, hit.trust, hit.quality, hit.simhash, hit.source_ref) == (
        "k", SourceKind.IMPORT, Trust.UNTRUSTED, None, None, "s")  # fmt: skip


def test_public_api() -> None:
    """The package exports the key, record and hit helpers."""
    assert set(mod.__all__) == {"ID_NAMESPACE", "chunk_key", "chunk_record", "record_hit", "simhash_of"}
