"""What ingestion produces and what every store writer consumes: :class:`Chunk` and :class:`StoreWriter`.

Each chunk carries the features fusion reads from hits, computed once here rather than per query: content
quality, SimHash of the text, URL key and title key (:func:`fabric.ingest.loaders.finalize_all`).

A store writer is the write side of one backend (SQLite FTS5, Qdrant, the SQLite graph, Meilisearch, ArangoDB).
The ingestion pipeline loads and chunks a source, embeds the chunks when a store needs vectors, and hands
every writer the same chunks; the ledger (:mod:`fabric.ingest.ledger`) records which stores hold each chunk.

Writers are built like lanes, from the lane's :class:`~lanes.base.LaneSpec` and the shared
:class:`~lanes.base.LaneResources` (each backend declares its writer in its descriptor, :class:`lanes.base.Backend`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from fabric.core.models import EMPTY_MAPPING, SourceKind, Trust

__all__ = [
    "Chunk",
    "FinishingStore",
    "ListableStore",
    "PrefetchingStore",
    "StoreWriter",
    "Triple",
    "TripleReader",
    "from_stored_simhash",
    "to_stored_simhash",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Chunk:
    """One retrievable unit with its provenance, as written to every store."""

    id: str
    """Store-wide id: ``doc_id#chunk_id`` for Markdown/JSONL sources, the BEIR ``_id`` for BEIR corpora."""
    doc_id: str
    """Stable id of the whole document (source + relative path, or the entry id)."""
    chunk_id: str
    """Stable id within the document (heading anchor + ordinal)."""
    title: str
    """Document title plus heading path, when there is one."""
    text: str
    """The chunk text (bounded by the chunker's cap)."""
    url: str = ""
    """Canonical URL, or a ``doc:`` reference for local files."""
    domain: str = ""
    """Host of ``url`` without ``www.``; empty for local files."""
    published_at: datetime | None = None
    """Publication time (UTC) when the source gives a date."""
    years: tuple[int, ...] = ()
    """Years mentioned in the title/text (or of ``published_at``), for temporal filters."""
    source_kind: SourceKind = SourceKind.IMPORT
    """Provenance class (the docs-memory policy)."""
    source_ref: str = ""
    """Where the chunk came from (``repo:path``, a file path, a dataset name)."""
    trust: Trust = Trust.UNTRUSTED
    """Operator-authored sources are trusted; imports are not unless promoted."""
    quality: float | None = None
    """Content quality in [0, 1] (``fusion.quality.content_quality``); None when unknown."""
    simhash: int | None = None
    """64-bit SimHash of the text (``fusion.simhash``, unsigned; every store keeps it as 16 hex digits, see
    :func:`to_stored_simhash`); None for a text without words."""
    url_key: str = ""
    """The URL as dedup compares it (``fusion.urls.url_key``)."""
    title_key: str = ""
    """The title's word set as dedup compares it (``fusion.text.title_key``)."""
    content_hash: str = ""
    """sha256 of everything written for this chunk; unchanged hash → nothing to write."""
    metadata: Mapping[str, Any] = field(default_factory=lambda: EMPTY_MAPPING)
    """Extra fields (``heading_path``, ``doc_kind``, ``path``); stored as JSON."""
    vector: tuple[float, ...] | None = None
    """Embedding of :attr:`embed_text`, set by the pipeline for stores that need vectors."""

    @property
    def embed_text(self) -> str:
        """The text that is embedded: title and body, as BEIR evaluations do."""
        return f"{self.title} {self.text}".strip()


Triple = tuple[str, str, str]
"""A graph relation ``(subject, predicate, object)`` by entity name."""


def to_stored_simhash(value: int | None) -> str | None:
    """A SimHash as every store keeps it: 16 lower-case hex digits (None stays None).

    One form for every store. Text, because the JSON stores (Meilisearch, ArangoDB) work on numbers as doubles,
    exact only up to 2**53, and a 64-bit signature is not; a string survives every store and client exactly, and
    it needs no sign trick. SQLite keeps it in a ``TEXT`` column (an ``INTEGER`` column would read
    ``'00000000000012e5'`` as the number 1200000: homes written with the former signed-integer column are migrated
    when opened, see :mod:`lanes.sqlite_common`).
    """
    return None if value is None else f"{value:016x}"


def from_stored_simhash(value: object) -> int | None:
    """The unsigned SimHash back from its stored form, or None when absent or not a 64-bit signature.

    Reads the 16 hex digits :func:`to_stored_simhash` writes, and the signed 64-bit integers of homes written
    before (Qdrant and ``numpy_flat`` payloads keep those until the chunk is written again).
    """
    if isinstance(value, str):
        try:
            sig = int(value, 16)
        except ValueError:
            return None
    elif isinstance(value, int) and not isinstance(value, bool):
        sig = value + (1 << 64) if value < 0 else value  # the former signed form
        if value < -(1 << 63):
            return None
    else:
        return None
    return sig if 0 <= sig < 1 << 64 else None


@runtime_checkable
class StoreWriter(Protocol):
    """The write side of one store. All methods are idempotent; blocking SDKs run off the event loop.

    Attributes:
        store: the ledger name of the store (the lane backend name: ``sqlite_fts``, ``qdrant``, ...).
        needs_vectors: True when :meth:`upsert` requires ``Chunk.vector`` (chunks without one are skipped
            and reported as not held by the store).
    """

    store: str
    needs_vectors: bool

    async def open(self) -> None:
        """Create collections/tables/indexes if missing; idempotent."""
        ...

    async def upsert(self, chunks: Sequence[Chunk]) -> None:
        """Insert or replace ``chunks`` by id."""
        ...

    async def delete(self, ids: Sequence[str]) -> None:
        """Remove the chunks with these ids (unknown ids are ignored)."""
        ...

    async def aclose(self) -> None:
        """Flush and release resources."""
        ...


@runtime_checkable
class TripleReader(Protocol):
    """A graph store writer that can tell which triples each chunk contributed (read for the audit history)."""

    async def triples(self, ids: Sequence[str]) -> dict[str, set[Triple]]:
        """The triples stored for each of these chunk ids (ids without any are absent)."""


@runtime_checkable
class FinishingStore(Protocol):
    """A store writer with work to do once an ingest has written everything (the flat vector store builds its
    search graph); ``fabric ingest`` times it as the ``index`` stage."""

    async def finish(self) -> dict[str, Any]:
        """Finish the store after an ingest; a JSON-ready summary of what was done."""
        ...


@runtime_checkable
class PrefetchingStore(Protocol):
    """A store writer that can start on the next batch while it writes this one (the SQLite graph extracts its
    entities in another process); the ingest names the next batch just before it writes the current one."""

    def prefetch(self, chunks: Sequence[Chunk]) -> None:
        """Start the work of a later :meth:`StoreWriter.upsert` of exactly ``chunks`` that writes nothing."""
        ...


@runtime_checkable
class ListableStore(Protocol):
    """A store writer that can list the chunk ids it holds (``fabric check`` compares them with the ledger)."""

    store: str

    async def ids(self) -> set[str]:
        """Every chunk id the store holds."""
        ...
