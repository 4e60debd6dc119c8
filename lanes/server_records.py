"""Shared helpers of the server store writers (Meilisearch and ArangoDB, under ``lanes/*/*_writer.py``).

They implement :class:`fabric.core.chunks.StoreWriter` and share its idempotency rule: every
record's id is derived deterministically from the chunk (UUIDv5 of doc id and chunk id, plus the model for
vectors), never generated randomly, so a retried or repeated ingest overwrites instead of duplicating.

Chunks are read by attribute (``id``, ``doc_id``, ``title``, ``text``, ``url``, ``domain``,
``published_at``, ``source_kind``, ``source_ref``, ``trust``, ``quality`` and the dedup features ``simhash``,
``url_key``, ``title_key``), so any chunk type with those fields works; :func:`chunk_record` is the one place
that does it, and :func:`record_hit` reads a record back as a :class:`~fabric.core.models.Hit` (the lanes of these
servers share it; :func:`simhash_of` reads the SimHash).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from fabric.core.chunks import from_stored_simhash, to_stored_simhash
from fabric.core.models import Hit, SourceKind, Trust

__all__ = ["ID_NAMESPACE", "chunk_key", "chunk_record", "record_hit", "simhash_of"]

ID_NAMESPACE = uuid.UUID("6f1c2a3e-8d4b-5e6f-9a0b-1c2d3e4f5a6b")
"""UUIDv5 namespace of the fabric's deterministic store ids."""


def chunk_key(chunk_id: str, model: str = "") -> str:
    """Deterministic, store-safe id of a chunk (32 hex chars: a valid Meilisearch id and ArangoDB ``_key``).

    ``chunk_id`` is the store-wide :attr:`fabric.core.chunks.Chunk.id` (``doc_id#chunk_id``), so the key is a
    UUIDv5 of doc id and chunk id (plus the embedding model for vector stores); ``delete(ids)`` derives the same
    key from the id alone.
    """
    return uuid.uuid5(ID_NAMESPACE, "\x1f".join((chunk_id, model))).hex


def _get(chunk: Any, name: str, default: Any = None) -> Any:
    if isinstance(chunk, Mapping):
        return chunk.get(name, default)
    return getattr(chunk, name, default)


def simhash_of(record: Mapping[str, Any]) -> int | None:
    """The SimHash a server record holds (:func:`~fabric.core.chunks.to_stored_simhash`'s hex digits), or None."""
    return from_stored_simhash(record.get("simhash"))


def chunk_record(chunk: Any) -> dict[str, Any]:
    """A JSON-ready record of a chunk: ``key`` (deterministic), ``chunk_id`` and the payload fields."""
    chunk_id = str(_get(chunk, "id") or _get(chunk, "chunk_id"))
    doc_id = str(_get(chunk, "doc_id") or chunk_id)
    published = _get(chunk, "published_at")
    if isinstance(published, datetime):
        published_ts: int | None = int((published if published.tzinfo else published.replace(tzinfo=UTC)).timestamp())
    else:
        published_ts = None
    url = str(_get(chunk, "url") or f"doc:{doc_id}")
    record: dict[str, Any] = {
        "key": chunk_key(chunk_id),
        "chunk_id": chunk_id,
        "doc_id": doc_id,
        "title": str(_get(chunk, "title") or ""),
        "text": str(_get(chunk, "text") or ""),
        "url": url,
        "domain": str(_get(chunk, "domain") or ""),
        "published_ts": published_ts,
        "source_ref": str(_get(chunk, "source_ref") or ""),
        "quality": _get(chunk, "quality"),
        "simhash": _stored_simhash(_get(chunk, "simhash")),
        "url_key": _get(chunk, "url_key"),
        "title_key": _get(chunk, "title_key"),
    }
    for name, default in (("source_kind", "import"), ("trust", "untrusted")):
        value = _get(chunk, name, default)
        record[name] = value.value if isinstance(value, Enum) else str(value)
    return record


def _stored_simhash(value: Any) -> str | None:
    return to_stored_simhash(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _text(record: Mapping[str, Any], name: str) -> str | None:
    value = record.get(name)
    return value if isinstance(value, str) else None


def record_hit(record: Mapping[str, Any], *, rank: int, score: float, source_ref: str, **extra: Any) -> Hit:
    """The hit of a record :func:`chunk_record` wrote (``source_ref`` when the record names none; ``extra``:
    further :class:`~fabric.core.models.Hit` fields such as ``graph_hops``)."""
    ts = record.get("published_ts")
    kind = str(record.get("source_kind"))
    quality = record.get("quality")
    return Hit(
        id=str(record.get("chunk_id") or record.get("id") or record.get("_key")),
        rank=rank,
        score=score,
        title=str(record.get("title") or ""),
        text=str(record.get("text") or ""),
        url=str(record.get("url") or ""),
        domain=str(record.get("domain") or ""),
        published_at=datetime.fromtimestamp(ts, UTC) if isinstance(ts, int | float) else None,
        source_kind=SourceKind(kind) if kind in SourceKind._value2member_map_ else SourceKind.IMPORT,
        source_ref=str(record.get("source_ref") or source_ref),
        trust=Trust.TRUSTED if record.get("trust") == Trust.TRUSTED.value else Trust.UNTRUSTED,
        doc_id=str(record.get("doc_id") or ""),
        quality=float(quality) if isinstance(quality, int | float) and not isinstance(quality, bool) else None,
        simhash=simhash_of(record),
        url_key=_text(record, "url_key"),
        title_key=_text(record, "title_key"),
        **extra,
    )
