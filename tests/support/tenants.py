"""Tenant isolation checks shared by the per-backend tests: write each tenant's corpus, search as each tenant."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from fabric.core.chunks import Chunk, StoreWriter
from fabric.core.models import Embedder, LaneRequest
from lanes.base import Lane, LaneResources
from tests.support.embedded import chunk

__all__ = ["CORPORA", "QUERY", "embedded", "own_ids", "plain", "search_as_each", "write_as_each"]

QUERY = "Release Train deploy rollback runbook"
"""A query every tenant's corpus answers."""

CORPORA: Mapping[str, Sequence[tuple[str, str]]] = {
    "default": [("d-1", "Runbook of the Release Train: deploy, then rollback with the big button.")],
    "acme": [
        ("a-1", "Runbook of the Release Train: deploy and rollback within five minutes."),
        ("a-2", "Drills of the Release Train: rollback weekly, deploy runbook reviewed."),
    ],
    "beta": [("b-1", "Runbook of the Release Train: deploy; rollback needs a manager.")],
}
"""Tenant → its entries (id, text): same words and entity, so only isolation keeps one tenant's ids out of
another's answers."""


async def write_as_each(
    make_writer: Callable[[LaneResources], StoreWriter],
    resources_of: Callable[[str], LaneResources],
    to_chunks: Callable[[Sequence[tuple[str, str]]], list[Chunk]],
) -> None:
    """Write every tenant's corpus through a writer built with that tenant's resources."""
    for tenant, entries in CORPORA.items():
        writer = make_writer(resources_of(tenant))
        await writer.open()
        try:
            await writer.upsert(to_chunks(entries))
        finally:
            await writer.aclose()


async def search_as_each(
    make_lane: Callable[[LaneResources], Lane], resources_of: Callable[[str], LaneResources], **request: Any
) -> dict[str, set[str]]:
    """Tenant → the ids a lane built with that tenant's resources answers to :data:`QUERY`."""
    out: dict[str, set[str]] = {}
    for tenant in CORPORA:
        lane = make_lane(resources_of(tenant))
        await lane.open()
        try:
            out[tenant] = {h.id for h in await lane.search(LaneRequest(query=QUERY, top_k=20, **request))}
        finally:
            await lane.aclose()
    return out


def own_ids() -> dict[str, set[str]]:
    """Tenant → the ids of its own corpus (what :func:`search_as_each` must answer)."""
    return {t: {i for i, _ in entries} for t, entries in CORPORA.items()}


def plain(entries: Sequence[tuple[str, str]]) -> list[Chunk]:
    """Finalised chunks of ``entries`` (title: the text before its colon)."""
    return [chunk(i, text, title=text.split(":", 1)[0]) for i, text in entries]


def embedded(embedder: Embedder) -> Callable[[Sequence[tuple[str, str]]], list[Chunk]]:
    """Like :func:`plain`, with each chunk's vector from ``embedder`` (for the vector stores)."""

    def to_chunks(entries: Sequence[tuple[str, str]]) -> list[Chunk]:
        chunks = plain(entries)
        vectors = embedder.embed([c.embed_text for c in chunks])
        return [replace(c, vector=tuple(v)) for c, v in zip(chunks, vectors, strict=True)]

    return to_chunks
