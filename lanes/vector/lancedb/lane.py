"""Vector lane over an embedded LanceDB table (provider ``lancedb``): cosine search, filters before the top-k.

The table (:mod:`lanes.vector.lancedb.store`, written by :mod:`lanes.vector.lancedb.writer`) lives in
``<home>/vectors/lancedb/<model slug>.lance``. Every filter ``numpy_flat`` knows is a SQL prefilter, applied before the
top-k so that a filtered search fills ``top_k`` whenever enough rows pass: the date range (a chunk passes when a
year it mentions, 1800–2111, falls in the range's years), ``site:`` domains with their sub-domains, and the lane's
``trust`` option. The score is the cosine similarity, ``1 - cosine distance``, as the other vector lanes report it;
equal scores are ordered by id.

Below ``index_min_rows`` rows the table has no ANN index and LanceDB searches it exactly; the writer's ``finish``
(the ingest's ``index`` stage) builds the index once the table is large enough, and the lane then searches through
it (``nprobes``, ``ef``), the candidates re-scored on the full vectors (``refine_factor``). Rows written after the
index are searched exactly beside it. Each search sees the latest committed table version, another process's
writes included. LanceDB's calls are blocking: they run in a thread.

Options (``lanes.toml``)::

    [lanes.vector]
    kind = "vector"
    backend = "lancedb"
    options = { path = "", trust = "", index_min_rows = 20000, index_type = "IVF_HNSW_SQ", nprobes = 20,
                ef = 300, refine_factor = 1 }

``path`` is the database folder (default ``<home>/vectors/lancedb``); ``index_type`` is ``IVF_HNSW_SQ`` or
``IVF_PQ``. Needs the optional extra: ``pip install 'retrieval-fabric[lancedb]'`` (without it, selecting the backend
is a configuration error naming the extra).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

from fabric.core.errors import LaneBadResponse, LaneError, LaneUnavailable
from fabric.core.models import BoundConstraints, Hit, LaneRequest
from fabric.embed.query_batch import encode_query
from lanes.base import Backend, BaseLane, LaneResources, LaneSpec
from lanes.vector._payload import payload_hit
from lanes.vector.lancedb.store import (
    PROVIDER,
    YEAR_MAX,
    YEAR_MIN,
    LanceOptions,
    connect,
    map_lance_error,
    open_table,
    quote,
    table_dim,
    table_name,
)
from lanes.vector.lancedb.writer import LanceWriter

__all__ = ["BACKEND", "LanceVectorLane", "nearest", "vector_where"]


def vector_where(c: BoundConstraints, trust: str | None) -> str | None:
    """The SQL prefilter of a request's constraints and the lane's trust option (None: every row)."""
    parts: list[str] = []
    if c.date_from or c.date_to:
        lo = max(c.date_from.year if c.date_from else YEAR_MIN, YEAR_MIN)
        hi = min(c.date_to.year if c.date_to else YEAR_MAX, YEAR_MAX)
        years = ", ".join(str(y) for y in range(lo, hi + 1))
        parts.append(f"array_has_any(years, [{years}])" if years else "false")
    if trust:
        parts.append(f"trust = {quote(trust)}")
    if c.sites:
        sites = [s.lower() for s in c.sites]
        parts.append(
            "(" + " OR ".join(f"domain = {quote(s)} OR ends_with(domain, {quote('.' + s)})" for s in sites) + ")"
        )
    return " AND ".join(parts) or None


def nearest(
    table: Any, vector: Sequence[float], top_k: int, where: str | None, opts: LanceOptions, columns: Sequence[str]
) -> list[tuple[float, dict[str, Any]]]:
    """The ``top_k`` rows nearest to ``vector`` that pass ``where``: (cosine similarity, the row's ``columns``),
    best first, equal scores by id."""
    query = table.search(list(vector), vector_column_name="vector").distance_type("cosine").limit(top_k)
    query = query.nprobes(opts.nprobes).ef(opts.ef).refine_factor(opts.refine_factor)
    if where:
        query = query.where(where, prefilter=True)
    rows = query.select([*columns, "_distance"]).to_arrow().to_pylist()
    ranked = [(1.0 - float(r.pop("_distance")), r) for r in rows]
    ranked.sort(key=lambda sr: (-sr[0], str(sr[1].get("id", ""))))
    return ranked


class LanceVectorLane(BaseLane):
    """Cosine nearest neighbours in the LanceDB table, with filters applied before the top-k."""

    provider = PROVIDER
    year_filter_native = True  # the date range filters in the store, before the top-k

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        super().__init__(spec, resources)
        self.opts = LanceOptions.parse(spec)
        self.trust = self.opts.trust
        self.folder = self.opts.folder(resources)
        self._db: Any = None
        self._table: Any = None
        self._lock = threading.Lock()

    def _table_of(self) -> Any:
        """The model's table, opened on first use once it exists (None before any ingest)."""
        with self._lock:
            if self._table is None and self.resources.embedder is not None:
                if self._db is None:
                    self._db = connect(self.folder)
                self._table = open_table(self._db, self.folder, table_name(self.resources.embedder.name))
            return self._table

    async def open(self) -> None:
        """Open the table (when it exists) and load the embedding model off the event loop."""
        try:
            await asyncio.to_thread(self._table_of)
        except Exception as exc:
            raise map_lance_error(exc, self.name) from exc
        warm = getattr(self.resources.embedder, "warm", None)
        if callable(warm):
            await asyncio.to_thread(warm)

    def _search(self, vector: list[float], request: LaneRequest) -> list[Hit]:
        try:
            table = self._table_of()
            if table is None:
                return []
            dim = table_dim(table)
            if dim != len(vector):
                msg = f"query dimension {len(vector)} is not the store's dimension {dim}"
                raise LaneBadResponse(msg, lane=self.name, provider=self.provider)
            where = vector_where(request.constraints, self.trust)
            ranked = nearest(table, vector, request.top_k, where, self.opts, ("id", "payload"))
        except LaneError:
            raise
        except Exception as exc:
            raise map_lance_error(exc, self.name) from exc
        import json

        return [payload_hit(json.loads(row["payload"]), i, score) for i, (score, row) in enumerate(ranked, start=1)]

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
        """Drop the table and the connection."""
        with self._lock:
            self._table = None
            self._db = None


BACKEND = Backend(name="lancedb", lane=LanceVectorLane, writer=LanceWriter, options=LanceOptions.parse)
"""An embedded LanceDB table per embedding model, with an ANN index built by ingest (the ``lancedb`` extra)."""
