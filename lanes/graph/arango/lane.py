"""Graph lane over ArangoDB with the official ``python-arango`` driver, run off the event loop.

Model (created on ingest by :class:`lanes.graph.arango.writer.ArangoGraphWriter`): document collections ``entities``
(``name_norm``) and ``chunks`` (the passages), edge collections ``relations`` (entity → entity, with the chunk
that evidences it) and ``mentions`` (entity → chunk: provenance). A query's terms (1- to 3-grams, normalised)
select seed entities; the AQL traversal walks ``0..depth`` relation hops (depth from the bound ``search_depth``)
and follows ``mentions`` to chunks. A chunk scores ``Σ 1 / (1 + hops)`` over the paths reaching it;
``graph_hops`` is its shortest hop count.

The AQL text is a constant: everything that comes from the user (terms, bounds, sites, limits) and every
collection name travels as a bind variable. ``max_runtime`` is set on every query, and the driver's 60 s request
timeout and its urllib3 retries are replaced (``timeout_s``, no retries: the executor owns retries). The driver
is synchronous (``requests``), so each call runs in ``asyncio.to_thread``; when the executor cuts the lane, the
thread finishes on its own within ``timeout_s`` while the query is abandoned. The driver does not use the shared
aiohttp session, but only ever contacts the configured ``url``, never a host from query text.

Options (``lanes.toml``)::

    [lanes.graph]
    kind = "graph"
    backend = "arango"
    options = { url = "http://arangodb:8529", database = "fabric", username = "root", timeout_s = 3.0 }

``url`` (required; ``FABRIC_ARANGO_URL``), ``database`` (``fabric``), ``username`` (``root``), ``password``
(``FABRIC_ARANGO_PASSWORD``), ``timeout_s`` (default 5), ``max_runtime_s`` (default 2), ``max_seeds`` (20), and the
writer's ``write_timeout_s`` (30): :class:`~lanes.graph.arango.writer.ArangoOptions`, the one parser the lane and
writer share, as they share the driver set-up and :func:`~lanes.graph.arango.writer.map_arango_error`.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from fabric.core.models import Hit, LaneRequest
from lanes.base import Backend, BaseLane, LaneResources, LaneSpec
from lanes.graph.arango.writer import ArangoGraphWriter, ArangoOptions, connect, map_arango_error
from lanes.server_records import record_hit

__all__ = ["BACKEND", "SEARCH_AQL", "ArangoGraphLane", "query_terms"]

SEARCH_AQL = """
FOR s IN @@entities
  FILTER s.name_norm IN @terms
  LIMIT @max_seeds
  FOR v, e, p IN 0..@depth ANY s @@relations
    FOR c IN 1..1 OUTBOUND v @@mentions
      COLLECT key = c._key AGGREGATE hops = MIN(LENGTH(p.edges)), score = SUM(1 / (1 + LENGTH(p.edges)))
      LET doc = DOCUMENT(@chunks, key)
      FILTER doc != null
      FILTER @date_from == null OR doc.published_ts == null OR doc.published_ts >= @date_from
      FILTER @date_to == null OR doc.published_ts == null OR doc.published_ts <= @date_to
      FILTER LENGTH(@sites) == 0 OR doc.domain IN @sites
      SORT score DESC, hops ASC, key ASC
      LIMIT @top_k
      RETURN {doc: UNSET(doc, "_id", "_rev"), hops: hops, score: score}
"""
"""The one search query; every user-derived value is a bind variable."""

_WORD = re.compile(r"\w+")


def query_terms(text: str, max_n: int = 3) -> list[str]:
    """Normalised 1- to ``max_n``-grams of ``text`` (the keys entity names are stored under)."""
    words = _WORD.findall(text.casefold())
    grams = {" ".join(words[i : i + n]) for n in range(1, max_n + 1) for i in range(len(words) - n + 1)}
    return sorted(grams)


class ArangoGraphLane(BaseLane):
    """AQL traversal from query entities to the chunks that mention them."""

    provider = "arango"

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        super().__init__(spec, resources)
        self.opts = ArangoOptions.parse(spec, resources.tenant)
        self._client: Any = None
        self._db: Any = None

    def _connect(self) -> Any:
        if self._db is None:
            self._client, self._db = connect(self.opts, self.opts.timeout_s)
        return self._db

    async def open(self) -> None:
        """Build the driver objects (no request is sent)."""
        await asyncio.to_thread(self._connect)

    def _run(self, bind: dict[str, Any]) -> list[Any]:
        db = self._connect()
        cursor = db.aql.execute(
            SEARCH_AQL,
            bind_vars=bind,
            batch_size=max(1, bind["top_k"]),
            max_runtime=self.opts.max_runtime_s,
            count=False,
        )
        return list(cursor)

    async def search(self, request: LaneRequest) -> list[Hit]:
        """Run :data:`SEARCH_AQL` in a worker thread and convert the rows."""
        terms = query_terms(request.query)
        if not terms:
            return []
        c = request.constraints
        bind = {
            "@entities": "entities",
            "@relations": "relations",
            "@mentions": "mentions",
            "chunks": "chunks",
            "terms": terms,
            "max_seeds": self.opts.max_seeds,
            "depth": max(0, c.search_depth),
            "top_k": request.top_k,
            "date_from": int(c.date_from.timestamp()) if c.date_from else None,
            "date_to": int(c.date_to.timestamp()) if c.date_to else None,
            "sites": [s.lower() for s in c.sites],
        }
        import requests
        from arango.exceptions import ArangoError

        try:
            rows = await asyncio.to_thread(self._run, bind)
        except (ArangoError, requests.exceptions.RequestException, ConnectionAbortedError) as exc:
            raise map_arango_error(exc, self.name, self.provider) from None
        except (ValueError, KeyError, TypeError, RecursionError) as exc:  # an answer the driver cannot read
            raise map_arango_error(exc, self.name, self.provider) from None  # (malformed, too deep): LaneBadResponse
        return [
            record_hit(
                row.get("doc") or {}, rank=i + 1, score=float(row.get("score") or 0.0), source_ref="arango:chunks",
                graph_hops=int(row.get("hops") or 0),
            )
            for i, row in enumerate(rows)
            if isinstance(row, dict)
        ]  # fmt: skip

    async def aclose(self) -> None:
        """Close the driver's HTTP sessions."""
        if self._client is not None:
            await asyncio.to_thread(self._client.close)
            self._client = self._db = None


BACKEND = Backend(
    name="arango",
    lane=ArangoGraphLane,
    writer=ArangoGraphWriter,
    options=ArangoOptions.parse,
    env={"FABRIC_ARANGO_URL": "url", "FABRIC_ARANGO_PASSWORD": "password"},
    secrets=frozenset({"password"}),
    self_hosted=True,
)
"""The ArangoDB backend: graph lane and graph writer over one database."""
