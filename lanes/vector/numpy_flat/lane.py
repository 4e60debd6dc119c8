"""Vector lane over the flat vector store (provider ``numpy_flat``): exact cosine search, filters before top-k.

The embedded default (docs/vector-store.md says why: at 50K entries Qdrant local mode wrote for minutes and
searched in ~100 ms, an ANN index costs a build and recall). The store (:mod:`lanes.vector.numpy_flat.writer`) is one
SQLite file per embedding model; :class:`~lanes.vector.numpy_flat.index.FlatIndex` mirrors it in numpy and follows
ingestion incrementally, even from another process. Every filter the lane knows — the date range (a chunk passes
when a year it mentions falls in the range's years, the router policy), ``site:`` domains with their sub-domains, and
the
lane's ``trust`` option — is a row mask computed before the top-k, so a filtered search fills ``top_k`` whenever
enough rows pass.

The query is encoded through :func:`fabric.embed.query_batch.encode_query` (micro-batched with concurrent queries, off
the event loop); without an embedder the lane raises :class:`~fabric.core.errors.LaneUnavailable` and the executor
falls back to the keyword lane.

Options (``lanes.toml``)::

    [lanes.vector]
    kind = "vector"
    backend = "numpy_flat"
    options = { path = ".fabric/vectors/all_minilm_l6_v2.sqlite", trust = "", ann = true, ann_min_rows = 20000,
                ann_ef = 300 }

``ann`` turns on the HNSW accelerator of unfiltered searches (:mod:`lanes.vector.numpy_flat.ann`) for stores of at least
``ann_min_rows`` live rows; ``ann_ef`` is its search breadth.
"""

from __future__ import annotations

import asyncio
import sqlite3

from fabric.core.errors import LaneBadResponse, LaneUnavailable
from fabric.core.models import BoundConstraints, Hit, LaneRequest
from fabric.embed.query_batch import encode_query
from lanes.base import Backend, BaseLane, LaneResources, LaneSpec
from lanes.vector._payload import payload_hit
from lanes.vector.numpy_flat.ann import ann_config
from lanes.vector.numpy_flat.index import FlatIndex, VectorFilter
from lanes.vector.numpy_flat.store import TRUST_CODES, store_path
from lanes.vector.numpy_flat.writer import FlatVectorWriter

__all__ = ["BACKEND", "FlatVectorLane", "vector_filter"]


def vector_filter(c: BoundConstraints, trust: str | None) -> VectorFilter:
    """The row filter of a request's constraints and the lane's trust option."""
    return VectorFilter(
        year_from=c.date_from.year if c.date_from else None,
        year_to=c.date_to.year if c.date_to else None,
        trust=TRUST_CODES[trust] if trust else None,
        sites=tuple(c.sites),
    )


class FlatVectorLane(BaseLane):
    """Exact cosine nearest neighbours over the flat store, with filters applied before the top-k."""

    provider = "numpy_flat"
    year_filter_native = True  # the date range filters in the store, before the top-k

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        super().__init__(spec, resources)
        trust = str(spec.options.get("trust", "")) or None
        if trust is not None and trust not in TRUST_CODES:
            from fabric.core.errors import ConfigError

            raise ConfigError(f"unknown trust {trust!r}; valid: {', '.join(TRUST_CODES)}", key="options.trust")
        self.trust = trust
        self.ann = ann_config(spec)
        self._index: FlatIndex | None = None

    def _index_of(self) -> FlatIndex:
        if self._index is None:
            model = self.resources.embedder.name if self.resources.embedder else "none"
            self._index = FlatIndex(store_path(self.spec, self.resources, model), self.ann)
        return self._index

    async def open(self) -> None:
        """Load the store's vectors and the embedding model off the event loop."""
        index = self._index_of()
        try:
            await asyncio.to_thread(index.snapshot)
        except sqlite3.Error as exc:
            raise LaneUnavailable(f"vector store unreadable: {exc}", lane=self.name, provider=self.provider) from exc
        warm = getattr(self.resources.embedder, "warm", None)
        if callable(warm):
            await asyncio.to_thread(warm)

    def _search(self, vector: list[float], request: LaneRequest) -> list[Hit]:
        index = self._index_of()
        try:
            ranked = index.search(vector, request.top_k, vector_filter(request.constraints, self.trust))
            payloads = index.payloads([rid for rid, _ in ranked])
        except sqlite3.Error as exc:
            raise LaneUnavailable(f"vector store unreadable: {exc}", lane=self.name, provider=self.provider) from exc
        except ValueError as exc:  # the query's dimension is not the store's
            raise LaneBadResponse(str(exc), lane=self.name, provider=self.provider) from exc
        hits: list[Hit] = []
        for rid, score in ranked:
            if rid in payloads:
                hits.append(payload_hit(payloads[rid], len(hits) + 1, score))
        return hits

    async def search(self, request: LaneRequest) -> list[Hit]:
        """Nearest chunks to the encoded query that pass the request's filters, best first (ties by id)."""
        embedder = self.resources.embedder
        if embedder is None:
            raise LaneUnavailable("no embedder configured or available", lane=self.name, provider=self.provider)
        if request.top_k <= 0 or not request.query.strip():
            return []
        vector = await encode_query(embedder, request.query)
        return await asyncio.to_thread(self._search, vector, request)

    async def aclose(self) -> None:
        """Close the store connection."""
        if self._index is not None:
            index, self._index = self._index, None
            await asyncio.to_thread(index.close)


BACKEND = Backend(name="numpy_flat", lane=FlatVectorLane, writer=FlatVectorWriter)
"""Exact vector search over one SQLite file per embedding model (the embedded default; docs/vector-store.md)."""
