"""Shared, typed data model of the fabric: requests, lane hits, lane outcomes, fused items, results.

This module imports only the standard library, :mod:`fabric.core.vocabulary` (the enums and constraints) and
:mod:`fabric.core.search_models` (the engine's request and answer), re-exporting their names here.
``lanes/`` and ``fusion/`` build on it and on :mod:`fabric.core.errors`; neither imports the other.

Conventions:
- every dataclass is frozen: rescore with :func:`dataclasses.replace`, never mutate a hit another stage holds;
- units are in names (``budget_ms``, ``latency_ms``);
- timestamps are timezone-aware UTC :class:`~datetime.datetime` objects;
- ranks are 1-based (the best hit of a lane has ``rank == 1``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Protocol

from fabric.core.search_models import PreflightResult, SearchRequest, SearchResult
from fabric.core.sources import author_of, document_id
from fabric.core.vocabulary import (
    EMPTY_MAPPING,
    BoundConstraints,
    Constraints,
    FusionMode,
    LaneKind,
    LaneStatus,
    Mode,
    SourceFilter,
    SourceKind,
    Trust,
    iso_utc,
)

__all__ = [
    "EMPTY_MAPPING",
    "BoundConstraints",
    "Constraints",
    "Embedder",
    "FusedItem",
    "FusionMode",
    "Hit",
    "LaneKind",
    "LaneOutcome",
    "LaneRequest",
    "LaneStatus",
    "Mode",
    "PreflightResult",
    "SearchRequest",
    "SearchResult",
    "SourceFilter",
    "SourceKind",
    "Trust",
    "iso_utc",
    "make_fused_item",
    "make_lane_outcome",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class LaneRequest:
    """What one lane is asked: the (refined) query text plus structured parameters."""

    query: str
    """Query text, already refined by pre-flight when it ran."""
    top_k: int = 50
    """How many hits the lane should return at most, best first."""
    constraints: BoundConstraints = field(default_factory=BoundConstraints)
    """Date bounds, domains, phrases and depth the lane should honour where it can."""
    trace_id: str = ""
    """The query's trace id, for the lane's own log lines."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Hit:
    """One lane result, best first within its lane."""

    id: str
    """Stable item id (a chunk id for embedded stores, a normalised URL for web items)."""
    rank: int
    """1-based rank within the lane."""
    score: float
    """The lane's native score (BM25, cosine, hop-decayed graph score, ...); larger is better."""
    title: str = ""
    """Document or section title."""
    text: str = ""
    """Passage text used for snippets, dedup content hashes, quality and citations."""
    url: str = ""
    """Canonical URL, or a ``doc:`` reference for local documents."""
    domain: str = ""
    """Host name without ``www.``; empty for local documents."""
    published_at: datetime | None = None
    """Publication time (UTC), when known."""
    source_kind: SourceKind = SourceKind.IMPORT
    """Provenance class (the docs-memory policy)."""
    source_ref: str = ""
    """Where the item came from (path, feed URL, collection)."""
    trust: Trust = Trust.UNTRUSTED
    """Trusted sources are operator-authored."""
    doc_id: str = ""
    """Id of the whole document a chunk belongs to."""
    graph_hops: int | None = None
    """Hops from a query entity to this chunk in the graph lane; None for other lanes."""
    quality: float | None = None
    """Content quality in [0, 1], computed once per document at ingest; None when unknown."""
    simhash: int | None = None
    """64-bit SimHash of the text (``fusion.simhash.simhash64``, unsigned), computed once at ingest.

    None: dedup computes it.
    """
    url_key: str | None = None
    """The URL as deduplication compares it (``fusion.urls.url_key``: normalised ``http(s)`` URL, ``""`` for any
    other), computed once at ingest. None: dedup computes it."""
    title_key: str | None = None
    """The title's word set as deduplication compares it (``fusion.text.title_key``: case-folded, unique, sorted,
    space-separated), computed once at ingest. None: dedup computes it."""
    metadata: Mapping[str, Any] = field(default_factory=lambda: EMPTY_MAPPING)
    """Backend-specific extras; never used for ranking."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LaneOutcome:
    """How one planned lane ended: always produced, whatever happened inside the lane."""

    lane: str
    """Lane name from ``fabric/config/lanes.toml``."""
    kind: LaneKind
    """Lane kind."""
    provider: str
    """Backend that answered (for a fallback: the fallback's provider)."""
    status: LaneStatus
    """success, timeout, error, skipped, suspended or fallback."""
    latency_ms: float = 0.0
    """Wall time spent on this lane (fallback included)."""
    hits: tuple[Hit, ...] = ()
    """Hits, best first; empty unless status is success or fallback."""
    weight: float = 1.0
    """Fusion weight: configured lane weight times the provider penalty factor times :attr:`confidence`."""
    error: str | None = None
    """Error text for timeout/error/suspended/skipped."""
    fallback_for: str | None = None
    """For status ``fallback``: the lane whose failure this one stands in for."""
    health: Mapping[str, Any] = field(default_factory=lambda: EMPTY_MAPPING)
    """Provider health snapshot (state, failure rate, suspended_until, penalty)."""
    confidence: float = 1.0
    """The factor of :attr:`weight` taken from the top hit's score (``[fusion.confidence]``); 1 when not calibrated."""

    def to_dict(self) -> dict[str, Any]:
        """The lane section of the result JSON."""
        return {
            "status": self.status.value,
            "provider": self.provider,
            "latency_ms": round(self.latency_ms, 3),
            "hits": len(self.hits),
            "weight": round(self.weight, 4),
            "confidence": round(self.confidence, 4),
            "fallback_for": self.fallback_for,
            "error": self.error,
            "health": dict(self.health),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class FusedItem:
    """One item of the fused answer set, with every score that placed it."""

    hit: Hit
    """The representative hit (best-ranked occurrence)."""
    score_total: float
    """Final ranking score in [0, 1]."""
    scores: Mapping[str, float]
    """Every component: rrf, domain_diversity, recency, authority, quality, and lexical/semantic/graph."""
    lanes: tuple[str, ...]
    """Lanes that returned the item (or a duplicate merged into it)."""
    ranks: Mapping[str, int]
    """Best 1-based rank per lane."""
    stage_priority: int = 0
    """0 for stage-1 lanes, 1 for stage-2 fill (the staged-retrieval policy)."""
    merged_ids: tuple[str, ...] = ()
    """Ids of duplicates merged into this item."""

    @property
    def id(self) -> str:
        """The item id."""
        return self.hit.id

    def to_dict(self) -> dict[str, Any]:
        """The item shape of the result JSON (DESIGN.md)."""
        h = self.hit
        snippet = h.text if len(h.text) <= 300 else h.text[:297].rstrip() + "..."
        return {
            "id": h.id,
            "title": h.title,
            "url": h.url,
            "domain": h.domain,
            "snippet": snippet,
            "source_kind": h.source_kind.value,
            "source_ref": h.source_ref,
            "trust": h.trust.value,
            "published_at": iso_utc(h.published_at),
            "doc_id": document_id(h),
            "author": author_of(h),
            "score_total": round(self.score_total, 6),
            "scores": {k: round(v, 6) for k, v in self.scores.items()},
            "lanes": list(self.lanes),
            "ranks": dict(self.ranks),
            "graph_hops": h.graph_hops,
            "merged_ids": list(self.merged_ids),
        }


def _slot_setters(cls: type) -> tuple[Callable[[Any, Any], None], ...]:
    """The slot setters of a slotted dataclass's fields, in declaration order (the ``make_*`` argument order)."""
    return tuple(cls.__dict__[f.name].__set__ for f in fields(cls))


_FUSED_SET = _slot_setters(FusedItem)
_new = object.__new__


def make_fused_item(
    hit: Hit,
    score_total: float,
    scores: Mapping[str, float],
    lanes: tuple[str, ...],
    ranks: Mapping[str, int],
    stage_priority: int,
    merged_ids: tuple[str, ...],
) -> FusedItem:
    """``FusedItem(...)`` for fusion's hot path: the same frozen object, its slots filled directly.

    A frozen dataclass's ``__init__`` goes through ``object.__setattr__`` once per field; a page of items is
    built per query, and this costs about a third of it. Every field is given, so the result equals
    ``FusedItem(hit=hit, ...)`` (tested).
    """
    item = _new(FusedItem)
    s_hit, s_total, s_scores, s_lanes, s_ranks, s_stage, s_merged = _FUSED_SET
    s_hit(item, hit)
    s_total(item, score_total)
    s_scores(item, scores)
    s_lanes(item, lanes)
    s_ranks(item, ranks)
    s_stage(item, stage_priority)
    s_merged(item, merged_ids)
    return item


_OUTCOME_SET = _slot_setters(LaneOutcome)


def make_lane_outcome(
    lane: str,
    kind: LaneKind,
    provider: str,
    status: LaneStatus,
    latency_ms: float,
    hits: tuple[Hit, ...],
    weight: float,
    error: str | None,
    fallback_for: str | None,
    health: Mapping[str, Any],
    confidence: float = 1.0,
) -> LaneOutcome:
    """``LaneOutcome(...)`` for the executor's hot path (one per lane per query), slots filled directly.

    Every field is given, so the result equals ``LaneOutcome(lane=lane, ...)`` (tested).
    """
    out = _new(LaneOutcome)
    s_lane, s_kind, s_provider, s_status, s_latency, s_hits, s_weight, s_error, s_for, s_health, s_conf = _OUTCOME_SET
    s_lane(out, lane)
    s_kind(out, kind)
    s_provider(out, provider)
    s_status(out, status)
    s_latency(out, latency_ms)
    s_hits(out, hits)
    s_weight(out, weight)
    s_error(out, error)
    s_for(out, fallback_for)
    s_health(out, health)
    s_conf(out, confidence)
    return out


class Embedder(Protocol):
    """Turns texts into unit-length vectors. Implementations live in :mod:`fabric.embed.embeddings`.

    An embedder may also have ``embed_queries(texts)``, which queries go through
    (:func:`fabric.embed.query_batch.encode_query`) when it encodes them with another model than documents
    (``[embeddings] query_weights``); without it, queries are embedded as documents.
    """

    name: str
    """Model identifier, part of cache keys and point ids."""
    dim: int
    """Vector size."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts (blocking; call from a thread inside async code).

        Raises:
            fabric.core.errors.LaneUnavailable: the model or endpoint cannot be used.
        """
        ...
