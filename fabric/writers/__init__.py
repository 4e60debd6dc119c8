"""Store writers for the server backends (Meilisearch, ArangoDB): ``upsert(chunks)`` and ``delete(ids)``.

They follow the ingestion store-writer protocol (``fabric/ingest/``) and share its idempotency rule: every
record's id is derived deterministically from the chunk (UUIDv5 of doc id and chunk id, plus the model for
vectors), never generated randomly, so a retried or repeated ingest overwrites instead of duplicating.

Chunks are read by attribute (``id``/``chunk_id``, ``doc_id``, ``title``, ``text``, ``url``, ``domain``,
``published_at``, ``source_kind``, ``source_ref``, ``trust``, ``quality``), so any chunk type with those fields
works; :func:`chunk_record` is the one place that does it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import Enum
from typing import Any

__all__ = ["ID_NAMESPACE", "chunk_key", "chunk_record"]

ID_NAMESPACE = uuid.UUID("6f1c2a3e-8d4b-5e6f-9a0b-1c2d3e4f5a6b")
"""UUIDv5 namespace of the fabric's deterministic store ids."""


def chunk_key(doc_id: str, chunk_id: str, model: str = "") -> str:
    """Deterministic, store-safe id (32 hex chars: valid as a Meilisearch id and an ArangoDB ``_key``)."""
    return uuid.uuid5(ID_NAMESPACE, "\x1f".join((doc_id, chunk_id, model))).hex


def _get(chunk: Any, name: str, default: Any = None) -> Any:
    if isinstance(chunk, Mapping):
        return chunk.get(name, default)
    return getattr(chunk, name, default)


def chunk_record(chunk: Any) -> dict[str, Any]:
    """A JSON-ready record of a chunk: ``key`` (deterministic), ``chunk_id`` and the payload fields."""
    chunk_id = str(_get(chunk, "chunk_id") or _get(chunk, "id"))
    doc_id = str(_get(chunk, "doc_id") or chunk_id)
    published = _get(chunk, "published_at")
    if isinstance(published, datetime):
        published_ts: int | None = int((published if published.tzinfo else published.replace(tzinfo=UTC)).timestamp())
    else:
        published_ts = None
    url = str(_get(chunk, "url") or f"doc:{doc_id}")
    record: dict[str, Any] = {
        "key": chunk_key(doc_id, chunk_id),
        "chunk_id": chunk_id,
        "doc_id": doc_id,
        "title": str(_get(chunk, "title") or ""),
        "text": str(_get(chunk, "text") or ""),
        "url": url,
        "domain": str(_get(chunk, "domain") or ""),
        "published_ts": published_ts,
        "source_ref": str(_get(chunk, "source_ref") or ""),
        "quality": _get(chunk, "quality"),
    }
    for name, default in (("source_kind", "import"), ("trust", "untrusted")):
        value = _get(chunk, name, default)
        record[name] = value.value if isinstance(value, Enum) else str(value)
    return record
