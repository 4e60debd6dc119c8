"""ArangoDB store writer (:class:`fabric.core.chunks.StoreWriter`): graph collections created on open; chunks,
entities and edges upserted.

Collections (see :mod:`lanes.graph.arango.lane`): ``chunks`` and ``entities`` (documents), ``relations`` (entity →
entity, each edge carrying the ``chunk_id`` that evidences it) and ``mentions`` (entity → chunk, provenance).
Every ``_key`` is deterministic (:func:`lanes.server_records.chunk_key` / UUIDv5 of the names), and inserts use
``overwrite_mode="replace"``, so repeating an ingest cannot duplicate anything.

Entities and relations are exactly what the SQLite graph stores
(:func:`lanes.graph._extract.chunk_graph.chunk_extraction`):
the lane's extractor (by default :class:`~lanes.graph._extract.entities.RuleExtractor`: entities, ``co_occurs`` edges
and the
directed verb-pattern triples of :mod:`lanes.graph._extract.relations`) plus the triples supplied at ingest (the
JSONL ``triples`` field), normalised with the lane's alias table (``options.aliases`` / ``options.aliases_file``).
A chunk written again first loses its old edges, so a changed text or triple list leaves no stale edge.

The driver is synchronous: the async methods run it in a worker thread, with the request timeout overridden and
its retries off. The database is created when missing (through ``_system``, so the configured
user needs that right; the compose stack uses ``root``). The lane and the writer share :class:`ArangoOptions` (one
parser of the options), :func:`connect` (the driver set-up) and :func:`map_arango_error` (one error mapping; the
writer reports a mapped error as an :class:`~fabric.core.errors.IngestError`).

The writer lists the chunk ids it holds (:class:`~fabric.core.chunks.ListableStore`, for ``fabric check``): an
AQL cursor over the ``chunks`` collection returning each document's ``chunk_id``, read in batches of
:attr:`ArangoGraphWriter.id_batch` (the driver fetches the next batch with ``POST /_api/cursor/<id>`` while
``hasMore``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fabric.core.chunks import Chunk, Triple
from fabric.core.errors import IngestError, LaneBadResponse, LaneError, LaneRejected, LaneTimeout, LaneUnavailable
from fabric.core.tenants import DEFAULT_TENANT, scoped_name
from fabric.net.httpclient import parse_retry_after
from lanes._options import LaneOptions
from lanes.base import LaneResources, LaneSpec
from lanes.graph._extract.chunk_graph import chunk_extraction, load_aliases
from lanes.graph._extract.entities import EntityExtractor, RuleExtractor
from lanes.server_records import ID_NAMESPACE, chunk_key, chunk_record

__all__ = [
    "COLLECTIONS",
    "ArangoGraphWriter",
    "ArangoOptions",
    "connect",
    "entity_key",
    "map_arango_error",
]

COLLECTIONS: dict[str, bool] = {"chunks": False, "entities": False, "relations": True, "mentions": True}
"""Collection name → is it an edge collection."""

_MAX_DATABASE = 64
"""Longest database name ArangoDB accepts under its traditional naming rules."""
_DELETE_MENTIONS = "FOR m IN @@c FILTER m._to IN @t REMOVE m IN @@c"
_DELETE_RELATIONS = "FOR r IN @@c FILTER r.chunk_key IN @k REMOVE r IN @@c"
_LIST_IDS = "FOR c IN @@c RETURN c.chunk_id"
_TRIPLES = (
    "FOR r IN @@c FILTER r.chunk_key IN @k RETURN {chunk_id: r.chunk_id, head: r.head, type: r.type, tail: r.tail}"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ArangoOptions:
    """``[lanes.<name>.options]`` of an ArangoDB lane, read once for the lane and its writer."""

    url: str
    """Server URL (required; ``FABRIC_ARANGO_URL``)."""
    database: str = "fabric"
    """``options.database`` for the ``default`` tenant, ``<database>__<tenant>`` for another (one database per
    tenant, :func:`fabric.core.tenants.scoped_name`; created on first write like the default one)."""
    username: str = "root"
    password: str = ""
    """``FABRIC_ARANGO_PASSWORD``; never written in TOML."""
    timeout_s: float = 5.0
    """Per search request."""
    max_runtime_s: float = 2.0
    """AQL ``max_runtime`` of a search."""
    max_seeds: int = 20
    """Seed entities per search."""
    write_timeout_s: float = 30.0
    """Per write request of the writer."""

    @classmethod
    def parse(cls, spec: LaneSpec, tenant: str = DEFAULT_TENANT) -> ArangoOptions:
        """Read and validate the options (a :class:`~fabric.core.errors.ConfigError` names a bad key), with the
        database of ``tenant``."""
        opts = LaneOptions(spec)
        return cls(
            url=opts.text("url"),
            database=scoped_name(opts.text("database", "fabric"), tenant, limit=_MAX_DATABASE),
            username=opts.text("username", "root"),
            password=opts.text("password", ""),
            timeout_s=opts.number("timeout_s", 5.0),
            max_runtime_s=opts.number("max_runtime_s", 2.0),
            max_seeds=opts.integer("max_seeds", 20),
            write_timeout_s=opts.number("write_timeout_s", 30.0),
        )


def connect(opts: ArangoOptions, timeout_s: float, database: str | None = None) -> tuple[Any, Any]:
    """A driver client (its request timeout replaced, urllib3 retries off) and a handle on ``database``.

    Sends no request; the default database is ``opts.database``.
    """
    from arango.client import ArangoClient
    from arango.http import DefaultHTTPClient

    http = DefaultHTTPClient(request_timeout=timeout_s, retry_attempts=0)
    client = ArangoClient(hosts=opts.url, http_client=http, request_timeout=timeout_s, resolver_max_tries=1)
    db = client.db(database or opts.database, username=opts.username, password=opts.password)
    return client, db


def map_arango_error(exc: BaseException, lane: str, provider: str) -> LaneError:
    """Driver / transport exception → lane error, most specific first."""
    import requests
    from arango.exceptions import ArangoServerError

    if isinstance(exc, requests.exceptions.Timeout):
        return LaneTimeout(f"ArangoDB request timed out: {exc}", lane=lane, provider=provider)
    if isinstance(exc, requests.exceptions.RequestException | ConnectionAbortedError):
        return LaneUnavailable(f"cannot reach ArangoDB: {exc}", lane=lane, provider=provider)
    if isinstance(exc, ArangoServerError):
        code, num, msg = exc.http_code, exc.error_code, exc.error_message
        text = f"ArangoDB {code}/{num}: {msg}"
        if code in (401, 403):
            return LaneRejected(text, lane=lane, provider=provider, failure="forbidden")
        if code == 429:
            retry_after = parse_retry_after((exc.http_headers or {}).get("Retry-After"))
            return LaneRejected(text, lane=lane, provider=provider, suspend_s=retry_after)
        if num == 1500 or code == 410:  # query killed (max_runtime reached)
            return LaneTimeout(text, lane=lane, provider=provider)
        if (code is not None and code >= 500) or num in (1203, 1228):  # collection / database not found: nothing
            # ingested yet (a tenant's database is created by its first write)
            return LaneUnavailable(text, lane=lane, provider=provider)
        return LaneBadResponse(text, lane=lane, provider=provider)
    return LaneBadResponse(f"unexpected ArangoDB failure: {exc!r}", lane=lane, provider=provider)


def entity_key(name_norm: str) -> str:
    """Deterministic ``_key`` of an entity."""
    return uuid.uuid5(ID_NAMESPACE, "entity\x1f" + name_norm).hex


def _relation(head: str, kind: str, tail: str, key: str, chunk_id: str) -> tuple[str, dict[str, str]]:
    """The ``relations`` edge document of one triple evidenced by the chunk ``key``, by its deterministic key."""
    rk = uuid.uuid5(ID_NAMESPACE, f"rel\x1f{head}\x1f{kind}\x1f{tail}\x1f{key}").hex
    doc = {
        "_key": rk,
        "_from": f"entities/{entity_key(head)}",
        "_to": f"entities/{entity_key(tail)}",
        "type": kind,
        "head": head,
        "tail": tail,
        "chunk_id": chunk_id,
        "chunk_key": key,
    }
    return rk, doc


class ArangoGraphWriter:
    """Upserts chunks and their entity graph into one ArangoDB database."""

    store = "arango"
    needs_vectors = False
    id_batch = 1000
    """Chunk ids per cursor batch when listing them (:meth:`ids`)."""

    def __init__(self, spec: LaneSpec, resources: LaneResources, extractor: EntityExtractor | None = None) -> None:
        self.spec = spec
        self.opts = ArangoOptions.parse(spec, resources.tenant)
        self.url = self.opts.url
        self.extractor = extractor
        self._aliases: dict[str, str] = {}
        self._db: Any = None
        self._client: Any = None

    def _extractor(self) -> EntityExtractor:
        """The extractor, built with the alias table on first use (the file is read then, not at construction)."""
        if self.extractor is None:
            self._aliases = load_aliases(self.spec)
            self.extractor = RuleExtractor(self._aliases)
        return self.extractor

    def _connect(self) -> Any:
        if self._db is None:
            self._client, sys_db = connect(self.opts, self.opts.write_timeout_s, "_system")
            if self.opts.database != "_system" and not sys_db.has_database(self.opts.database):
                sys_db.create_database(self.opts.database)
            self._db = self._client.db(self.opts.database, username=self.opts.username, password=self.opts.password)
            for name, edge in COLLECTIONS.items():
                if not self._db.has_collection(name):
                    self._db.create_collection(name, edge=edge)
        return self._db

    def _open_sync(self, _unused: Any) -> int:
        self._connect()
        return 0

    def _upsert(self, chunks: Sequence[Any]) -> int:
        db = self._connect()
        extractor = self._extractor()
        docs: list[dict[str, Any]] = []
        entities: dict[str, dict[str, str]] = {}
        relations: dict[str, dict[str, str]] = {}
        mentions: dict[str, dict[str, str]] = {}
        for chunk in chunks:
            rec = chunk_record(chunk)
            key = rec.pop("key")
            docs.append({"_key": key, **rec})
            ex = chunk_extraction(chunk, extractor, self._aliases)
            for name, label in ex.entities.items():
                ek = entity_key(name)
                entities[ek] = {"_key": ek, "name_norm": name, "label": label}
                mk = uuid.uuid5(ID_NAMESPACE, f"mention\x1f{ek}\x1f{key}").hex
                mentions[mk] = {
                    "_key": mk,
                    "_from": f"entities/{ek}",
                    "_to": f"chunks/{key}",
                    "chunk_id": rec["chunk_id"],
                }
            for head, kind, tail in ex.relations:
                if head in ex.entities and tail in ex.entities:
                    relations.update([_relation(head, kind, tail, key, rec["chunk_id"])])
        self._forget_edges(db, [d["_key"] for d in docs])
        for name, rows in (
            ("chunks", docs),
            ("entities", list(entities.values())),
            ("relations", list(relations.values())),
            ("mentions", list(mentions.values())),
        ):
            if rows:
                db.collection(name).insert_many(rows, overwrite_mode="replace", silent=True)
        return len(docs)

    @staticmethod
    def _forget_edges(db: Any, keys: list[str]) -> None:
        """Remove the mention and relation edges of the chunks with these keys."""
        if keys:
            db.aql.execute(_DELETE_MENTIONS, bind_vars={"@c": "mentions", "t": [f"chunks/{k}" for k in keys]})
            db.aql.execute(_DELETE_RELATIONS, bind_vars={"@c": "relations", "k": keys})

    def _delete(self, ids: Sequence[str]) -> int:
        db = self._connect()
        bind_keys = [chunk_key(i) for i in ids]
        self._forget_edges(db, bind_keys)
        db.collection("chunks").delete_many([{"_key": k} for k in bind_keys], silent=True)
        return len(bind_keys)

    def _triples(self, ids: Sequence[str]) -> dict[str, set[Triple]]:
        db = self._connect()
        keys = [chunk_key(i) for i in ids]
        out: dict[str, set[Triple]] = {}
        for row in db.aql.execute(_TRIPLES, bind_vars={"@c": "relations", "k": keys}):
            if row.get("head") is not None and row.get("tail") is not None:
                out.setdefault(str(row["chunk_id"]), set()).add((str(row["head"]), str(row["type"]), str(row["tail"])))
        return out

    def _ids(self) -> set[str]:
        db = self._connect()
        cursor = db.aql.execute(_LIST_IDS, bind_vars={"@c": "chunks"}, batch_size=self.id_batch, count=False)
        try:
            return {str(key) for key in cursor if key is not None}
        finally:
            cursor.close(ignore_missing=True)

    async def open(self) -> None:
        """Connect and create the collections if missing; idempotent."""
        await self._guard(self._open_sync, ())

    async def upsert(self, chunks: Sequence[Chunk]) -> None:
        """Write chunks, entities, relations and mentions (replace by deterministic key)."""
        await self._guard(self._upsert, chunks)

    async def delete(self, ids: Sequence[str]) -> None:
        """Remove the chunks with these ids and the edges that cite them."""
        if ids:
            await self._guard(self._delete, ids)

    async def triples(self, ids: Sequence[str]) -> dict[str, set[Triple]]:
        """The relations stored for each chunk id, by normalised entity name (for the audit history; edges
        written before the names were stored on them are skipped)."""
        if not ids:
            return {}
        found: dict[str, set[Triple]] = await self._off_loop(self._triples, list(ids))
        return found

    async def ids(self) -> set[str]:
        """Every chunk id the ``chunks`` collection holds, read through a batched AQL cursor (``fabric check``)."""
        found: set[str] = await self._off_loop(self._ids)
        return found

    async def aclose(self) -> None:
        """Close the driver's HTTP sessions."""
        if self._client is not None:
            await asyncio.to_thread(self._client.close)
            self._client = self._db = None

    async def _guard(self, fn: Any, arg: Any) -> int:
        return int(await self._off_loop(fn, arg))

    async def _off_loop(self, fn: Any, *args: Any) -> Any:
        """Run a driver call in a worker thread; driver and transport errors become one :class:`IngestError`."""
        import requests
        from arango.exceptions import ArangoError

        try:
            return await asyncio.to_thread(fn, *args)
        except (ArangoError, requests.exceptions.RequestException, ConnectionAbortedError) as exc:
            raise IngestError(f"arangodb {self.url}: {map_arango_error(exc, '', 'arango')}") from None
