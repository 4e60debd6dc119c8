"""Vector lane over Qdrant (provider ``qdrant``): cosine similarity of MiniLM (or endpoint) embeddings.

Local mode on disk by default (``<home>/qdrant``), a Qdrant server when ``options.url`` is set; see
:mod:`lanes.vector.qdrant.writer` for the shared client cache and point layout. The query is encoded with the
injected ``resources.embedder`` through :func:`fabric.embed.query_batch.encode_query` (micro-batched, off the loop);
without an embedder the lane raises :class:`~fabric.core.errors.LaneUnavailable` and the executor falls back to the
keyword lane.

Filters: ``trust`` (lane option) and the date range run inside Qdrant — a chunk passes when a year it mentions
(``years``, which includes its publication year) falls in the range's years (the router policy's year filter), so the
ANN
search itself fills ``top_k`` from as deep as needed. ``site:`` domains (with sub-domains) cannot be expressed
as a Qdrant condition: they are checked on returned payloads and the lane pages deeper until ``top_k`` hits pass
or the candidates run out (the deep fill of the router policy's FAISS note). The query's inferred years
(``query_years``) are soft: a second search keeps chunks published in range or with no publication date, they
come first, and the unfiltered ranking fills the rest, so an inferred year never empties the answer.

Options (``lanes.toml``)::

    [lanes.vector]
    kind = "vector"
    backend = "qdrant"
    options = { path = ".fabric/qdrant", url = "", api_key = "", collection = "", trust = "", max_pages = 20 }
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from fabric.core.errors import LaneUnavailable
from fabric.core.models import BoundConstraints, Hit, LaneRequest
from fabric.embed.query_batch import encode_query
from lanes.base import Backend, BaseLane, LaneResources, LaneSpec
from lanes.vector._payload import payload_hit
from lanes.vector.qdrant.writer import QdrantWriter, acquire_client, collection_name, map_qdrant_error, release_client

if TYPE_CHECKING:
    from qdrant_client import AsyncQdrantClient, models

__all__ = ["BACKEND", "QdrantVectorLane"]


def _native_filter(c: BoundConstraints, trust: str | None, *, soft: bool = False) -> models.Filter | None:
    """Qdrant conditions for the hard filters, plus (``soft``) the query's years: published in range or undated."""
    from qdrant_client import models  # deferred: the SDK takes seconds to import

    must: list[Any] = []
    if soft and c.query_years is not None:
        lo = datetime(c.query_years[0], 1, 1, tzinfo=UTC).timestamp()
        hi = datetime(c.query_years[1], 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()
        in_range = models.FieldCondition(key="published_ts", range=models.Range(gte=lo, lte=hi))
        undated = models.IsEmptyCondition(is_empty=models.PayloadField(key="published_ts"))
        must.append(models.Filter(should=[in_range, undated]))
    if c.date_from or c.date_to:
        rng = models.Range(gte=c.date_from.year if c.date_from else None, lte=c.date_to.year if c.date_to else None)
        must.append(models.FieldCondition(key="years", range=rng))
    if trust:
        must.append(models.FieldCondition(key="trust", match=models.MatchValue(value=trust)))
    return models.Filter(must=must) if must else None


def _exact(c: BoundConstraints, payload: dict[str, Any]) -> bool:
    """Filters Qdrant cannot express: ``site:`` domains and their sub-domains."""
    if c.sites:
        domain = str(payload.get("domain") or "")
        if not any(domain == s or domain.endswith("." + s) for s in (x.lower() for x in c.sites)):
            return False
    return True


class QdrantVectorLane(BaseLane):
    """Cosine nearest neighbours in Qdrant, with payload filters and temporal deep fill."""

    provider = "qdrant"
    year_filter_native = True  # the date range filters in the store, before the top-k

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        super().__init__(spec, resources)
        self.trust = str(spec.options.get("trust", "")) or None
        self.max_pages = int(spec.options.get("max_pages", 20))
        self._client: tuple[str, AsyncQdrantClient] | None = None

    async def open(self) -> None:
        """Acquire the (shared, per path) Qdrant client and load the embedding model off the event loop."""
        if self._client is None:
            self._client = acquire_client(self.spec, self.resources)
            warm = getattr(self.resources.embedder, "warm", None)
            if callable(warm):
                await asyncio.to_thread(warm)

    async def search(self, request: LaneRequest) -> list[Hit]:
        """Nearest chunks to the embedded query that pass the request's filters, best first."""
        embedder = self.resources.embedder
        if embedder is None:
            raise LaneUnavailable("no embedder configured or available", lane=self.name, provider=self.provider)
        if request.top_k <= 0 or not request.query.strip():
            return []
        vector = await encode_query(embedder, request.query)
        await self.open()
        assert self._client is not None
        client = self._client[1]
        collection = collection_name(self.spec, embedder.name, self.resources.tenant)
        c = request.constraints
        try:
            if not await client.collection_exists(collection):
                return []
            hits = await self._collect(client, collection, vector, c, _native_filter(c, self.trust), request.top_k)
            if c.query_years is not None:  # soft: in-range or undated chunks first, then the rest (deep fill)
                flt = _native_filter(c, self.trust, soft=True)
                preferred = await self._collect(client, collection, vector, c, flt, request.top_k)
                seen = {h.id for h in preferred}
                hits = preferred + [h for h in hits if h.id not in seen]
        except Exception as exc:  # SDK/transport errors become typed lane errors
            raise map_qdrant_error(exc) from exc
        out: list[Hit] = []
        for i, h in enumerate(hits[: request.top_k], start=1):  # a filled hit never outscores a preferred one
            out.append(dataclasses.replace(h, rank=i, score=min(h.score, out[-1].score) if out else h.score))
        return out

    async def _collect(
        self, client: AsyncQdrantClient, collection: str, vector: Any, c: BoundConstraints, flt: Any, top_k: int
    ) -> list[Hit]:
        """Nearest points passing ``flt`` and the payload checks, paging deeper while ``site:`` drops some."""
        post = bool(c.sites)
        page = max(top_k * 4, 64) if post else top_k
        hits: list[Hit] = []
        for n in range(self.max_pages if post else 1):
            res = await client.query_points(
                collection, query=vector, query_filter=flt, limit=page, offset=n * page, with_payload=True
            )
            for point in res.points:
                payload = point.payload or {}
                if _exact(c, payload):
                    hits.append(payload_hit(payload, len(hits) + 1, float(point.score)))
            if len(hits) >= top_k or len(res.points) < page:
                break
        return hits[:top_k]

    async def aclose(self) -> None:
        """Release the client."""
        if self._client is not None:
            key, client = self._client
            self._client = None
            await release_client(key, client)


BACKEND = Backend(
    name="qdrant",
    lane=QdrantVectorLane,
    writer=QdrantWriter,
    env={"FABRIC_QDRANT_URL": "url", "FABRIC_QDRANT_API_KEY": "api_key"},
    secrets=frozenset({"api_key"}),
    self_hosted=True,
)
"""Qdrant, embedded on disk by default or a server when ``url`` is set."""
