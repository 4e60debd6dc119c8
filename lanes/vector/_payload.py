"""The payload every vector store keeps beside a chunk's vector, and the hit read back from it.

One shape for the Qdrant points and the ``numpy_flat`` rows, so both lanes return the same
:class:`~fabric.core.models.Hit`
for the same chunk: the chunk's fields, its publication time as a POSIX timestamp, the years it mentions, and the
dedup features stored at ingest (SimHash as 16 hex digits, older payloads' signed integers read too; URL and
title keys).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeVar

from fabric.core.chunks import Chunk, from_stored_simhash, to_stored_simhash
from fabric.core.models import Hit, SourceKind, Trust

__all__ = ["chunk_payload", "payload_hit"]

_E = TypeVar("_E", SourceKind, Trust)


def chunk_payload(chunk: Chunk) -> dict[str, Any]:
    """The stored payload of ``chunk`` (JSON-safe)."""
    return {
        "id": chunk.id,
        "doc_id": chunk.doc_id,
        "chunk_id": chunk.chunk_id,
        "title": chunk.title,
        "text": chunk.text,
        "url": chunk.url,
        "domain": chunk.domain,
        "published_ts": chunk.published_at.timestamp() if chunk.published_at else None,
        "years": sorted(set(chunk.years)),
        "source_kind": chunk.source_kind.value,
        "source_ref": chunk.source_ref,
        "trust": chunk.trust.value,
        "quality": chunk.quality,
        "simhash": to_stored_simhash(chunk.simhash),
        "url_key": chunk.url_key,
        "title_key": chunk.title_key,
        "metadata": dict(chunk.metadata),
    }


def payload_hit(p: dict[str, Any], rank: int, score: float) -> Hit:
    """The hit of a stored payload at ``rank`` with ``score`` (keys a point predates read as absent)."""
    ts = p.get("published_ts")
    return Hit(
        id=str(p["id"]),
        rank=rank,
        score=score,
        title=str(p.get("title", "")),
        text=str(p.get("text", "")),
        url=str(p.get("url", "")),
        domain=str(p.get("domain", "")),
        published_at=datetime.fromtimestamp(ts, UTC) if ts is not None else None,
        source_kind=_member(SourceKind, p.get("source_kind"), SourceKind.IMPORT),
        source_ref=str(p.get("source_ref", "")),
        trust=_member(Trust, p.get("trust"), Trust.UNTRUSTED),
        doc_id=str(p.get("doc_id", "")),
        quality=p.get("quality"),
        simhash=from_stored_simhash(p.get("simhash")),
        url_key=_text_or_none(p.get("url_key")),
        title_key=_text_or_none(p.get("title_key")),
        metadata={**(p.get("metadata") or {}), "years": p.get("years", [])},
    )


def _member(cls: type[_E], value: Any, default: _E) -> _E:
    """The enum member stored as ``value``; ``default`` when it is absent or not a member (a payload spoiled in
    transit, e.g. a lone surrogate added to it, reads as the default rather than failing the whole answer)."""
    try:
        return cls(value) if value is not None else default
    except ValueError:
        return default


def _text_or_none(value: Any) -> str | None:
    """A stored dedup key, or None when the point predates it (fusion then computes the key)."""
    return value if isinstance(value, str) else None
