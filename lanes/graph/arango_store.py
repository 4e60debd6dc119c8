"""ArangoDB store writer (:class:`fabric.ingest.model.StoreWriter`): graph collections created on open; chunks,
entities and edges upserted.

Collections (see :mod:`lanes.graph.arango`): ``chunks`` and ``entities`` (documents), ``relations`` (entity →
entity, each edge carrying the ``chunk_id`` that evidences it) and ``mentions`` (entity → chunk, provenance).
Every ``_key`` is deterministic (:func:`fabric.writers.chunk_key` / UUIDv5 of the names), and inserts use
``overwrite_mode="replace"``, so repeating an ingest cannot duplicate anything.

Entities come from the chunk when it carries them (``entities``: names; ``relations``: ``(head, type, tail)``
triples), otherwise from :func:`extract_entities` (capitalised phrases and acronyms), related by co-occurrence
in a sentence. The driver is synchronous: the async methods run it in a worker thread, with the request timeout
overridden and its retries off. The database is created when missing (through ``_system``, so the configured
user needs that right; the compose stack uses ``root``). It reads the lane's options (``url``, ``database``,
``username``, ``password``) plus ``write_timeout_s`` (default 30).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Sequence
from typing import Any

from fabric.errors import IngestError
from fabric.ingest.model import Chunk
from fabric.writers import ID_NAMESPACE, chunk_key, chunk_record
from lanes._options import LaneOptions
from lanes.base import LaneResources, LaneSpec

__all__ = ["COLLECTIONS", "ArangoGraphStore", "entity_key", "extract_entities"]

COLLECTIONS: dict[str, bool] = {"chunks": False, "entities": False, "relations": True, "mentions": True}
"""Collection name → is it an edge collection."""

_ENTITY = re.compile(r"\b(?:[A-Z][\w-]*[A-Za-z0-9](?:\s+[A-Z][\w-]*[A-Za-z0-9]){0,2}|[A-Z]{2,}[0-9]*)\b")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_DELETE_MENTIONS = "FOR m IN @@c FILTER m._to IN @t REMOVE m IN @@c"
_DELETE_RELATIONS = "FOR r IN @@c FILTER r.chunk_key IN @k REMOVE r IN @@c"
_STOP = frozenset(
    {"the", "a", "an", "this", "these", "those", "we", "in", "on", "it", "our", "of", "for", "to", "and", "then",
     "however", "here", "there", "when", "while", "after", "before", "its", "their"}
)


def entity_key(name_norm: str) -> str:
    """Deterministic ``_key`` of an entity."""
    return uuid.uuid5(ID_NAMESPACE, "entity\x1f" + name_norm).hex


def _norm(name: str) -> str:
    return " ".join(re.findall(r"\w+", name.casefold()))


def extract_entities(text: str) -> list[tuple[str, int]]:
    """Capitalised phrases (up to 3 words) and acronyms, normalised, with the sentence index they occur in."""
    out: list[tuple[str, int]] = []
    for i, sentence in enumerate(_SENTENCE.split(text)):
        for match in _ENTITY.finditer(sentence):
            words = _norm(match.group(0)).split()
            while words and words[0] in _STOP:
                words.pop(0)
            norm = " ".join(words)
            if len(norm) > 1:
                out.append((norm, i))
    return out


def _graph_of(chunk: Any, text: str) -> tuple[set[str], set[tuple[str, str, str]]]:
    names = getattr(chunk, "entities", None) if not isinstance(chunk, dict) else chunk.get("entities")
    triples = getattr(chunk, "relations", None) if not isinstance(chunk, dict) else chunk.get("relations")
    if names or triples:
        ents = {_norm(n) for n in names or ()}
        rels = {(_norm(h), str(t), _norm(tl)) for h, t, tl in triples or ()}
        return ents | {h for h, _, _ in rels} | {t for _, _, t in rels}, rels
    found = extract_entities(text)
    by_sentence: dict[int, list[str]] = {}
    for name, idx in found:
        by_sentence.setdefault(idx, []).append(name)
    rels = set()
    for names_in in by_sentence.values():
        uniq = sorted(set(names_in))
        rels |= {(a, "co_occurs", b) for i, a in enumerate(uniq) for b in uniq[i + 1 :]}
    return {n for n, _ in found}, rels


class ArangoGraphStore:
    """Upserts chunks and their entity graph into one ArangoDB database."""

    store = "arango"
    needs_vectors = False

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        opts = LaneOptions(spec)
        self.url = opts.text("url")
        self.database = opts.text("database", "fabric")
        self.username = opts.text("username", "root")
        self.password = opts.text("password", "")
        self.timeout_s = opts.number("write_timeout_s", 30.0)
        self._db: Any = None
        self._client: Any = None

    def _connect(self) -> Any:
        if self._db is None:
            from arango.client import ArangoClient
            from arango.http import DefaultHTTPClient

            http = DefaultHTTPClient(request_timeout=self.timeout_s, retry_attempts=0)
            self._client = ArangoClient(
                hosts=self.url, http_client=http, request_timeout=self.timeout_s, resolver_max_tries=1
            )
            if self.database != "_system":
                sys_db = self._client.db("_system", username=self.username, password=self.password)
                if not sys_db.has_database(self.database):
                    sys_db.create_database(self.database)
            self._db = self._client.db(self.database, username=self.username, password=self.password)
            for name, edge in COLLECTIONS.items():
                if not self._db.has_collection(name):
                    self._db.create_collection(name, edge=edge)
        return self._db

    def _open_sync(self, _unused: Any) -> int:
        self._connect()
        return 0

    def _upsert(self, chunks: Sequence[Any]) -> int:
        db = self._connect()
        docs, entities, relations, mentions = [], {}, {}, {}
        for chunk in chunks:
            rec = chunk_record(chunk)
            key = rec.pop("key")
            docs.append({"_key": key, **rec})
            names, rels = _graph_of(chunk, f"{rec['title']}. {rec['text']}")
            for name in names:
                ek = entity_key(name)
                entities[ek] = {"_key": ek, "name_norm": name}
                mk = uuid.uuid5(ID_NAMESPACE, f"mention\x1f{ek}\x1f{key}").hex
                mentions[mk] = {
                    "_key": mk, "_from": f"entities/{ek}", "_to": f"chunks/{key}", "chunk_id": rec["chunk_id"],
                }
            for head, kind, tail in rels:
                rk = uuid.uuid5(ID_NAMESPACE, f"rel\x1f{head}\x1f{kind}\x1f{tail}\x1f{key}").hex
                relations[rk] = {
                    "_key": rk, "_from": f"entities/{entity_key(head)}", "_to": f"entities/{entity_key(tail)}",
                    "type": kind, "chunk_id": rec["chunk_id"], "chunk_key": key,
                }
        for name, rows in (("chunks", docs), ("entities", list(entities.values())),
                           ("relations", list(relations.values())), ("mentions", list(mentions.values()))):
            if rows:
                db.collection(name).insert_many(rows, overwrite_mode="replace", silent=True)
        return len(docs)

    def _delete(self, ids: Sequence[str]) -> int:
        db = self._connect()
        bind_keys = [chunk_key(i) for i in ids]
        targets = [f"chunks/{k}" for k in bind_keys]
        db.aql.execute(_DELETE_MENTIONS, bind_vars={"@c": "mentions", "t": targets})
        db.aql.execute(_DELETE_RELATIONS, bind_vars={"@c": "relations", "k": bind_keys})
        db.collection("chunks").delete_many([{"_key": k} for k in bind_keys], silent=True)
        return len(bind_keys)

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

    async def aclose(self) -> None:
        """Close the driver's HTTP sessions."""
        if self._client is not None:
            await asyncio.to_thread(self._client.close)
            self._client = self._db = None

    async def _guard(self, fn: Any, arg: Any) -> int:
        import requests
        from arango.exceptions import ArangoError

        try:
            return int(await asyncio.to_thread(fn, arg))
        except (ArangoError, requests.exceptions.RequestException, ConnectionAbortedError) as exc:
            raise IngestError(f"arangodb {self.url}: {exc}") from None
