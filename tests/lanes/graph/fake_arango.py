"""A loopback ArangoDB stand-in speaking the HTTP API ``python-arango`` uses (collections, documents, cursors).

Paths are database-scoped (``/_db/<db>/_api/...``) and so are the collections (one set per database; a database
that was never created answers 404, errorNum 1228); errors are ``{"error": true, "code", "errorNum",
"errorMessage"}``; ``POST /_api/cursor`` answers ``201`` with ``{"result", "hasMore", "cached", "extra", "error",
"code"}``. AQL is not parsed: the cursor endpoint evaluates the lane's and writer's *known* query texts in Python
over the stored collections (any other text is a 400 parse error, errorNum 1501), which also proves that user text
never reaches the query string. ``maxRuntime`` is honoured: a query slower than it is killed (410, errorNum 1500).
``batchSize`` is honoured: a longer result answers its first batch with ``hasMore: true`` and a cursor ``id``;
``POST /_api/cursor/<id>`` answers the next batch (``200``) and drops the cursor after the last one, ``DELETE
/_api/cursor/<id>`` drops it early (``202``); an unknown cursor is a 404, errorNum 1600.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from aiohttp import web

from lanes.graph.arango.lane import SEARCH_AQL
from lanes.graph.arango.writer import _DELETE_MENTIONS, _DELETE_RELATIONS, _LIST_IDS, _TRIPLES

__all__ = ["FakeArango"]


def _err(status: int, num: int, message: str) -> web.Response:
    return web.json_response({"error": True, "code": status, "errorNum": num, "errorMessage": message}, status=status)


class FakeArango:
    """In-memory ArangoDB. ``password`` enables basic auth for ``root``; ``query_delay_s`` slows cursors."""

    def __init__(self, password: str = "") -> None:
        self.password = password
        self.databases: list[str] = ["_system"]
        self.by_database: dict[str, dict[str, dict[str, Any]]] = {"_system": {}}
        self.cursors: list[dict[str, Any]] = []
        self.query_delay_s = 0.0
        self.hang = False
        self.open_cursors: dict[str, tuple[int, list[Any]]] = {}
        """Cursor id → (batch size, the rows not yet returned)."""
        self.batches: list[int] = []
        """Size of every batch answered (first and follow-up), in order."""

    def app(self) -> web.Application:
        """The aiohttp application."""
        app = web.Application(middlewares=[self._auth])
        app.router.add_get("/_db/_system/_api/database", self._databases)
        app.router.add_post("/_db/_system/_api/database", self._create_database)
        app.router.add_get("/_db/{db}/_api/collection", self._list)
        app.router.add_post("/_db/{db}/_api/collection", self._create)
        app.router.add_post("/_db/{db}/_api/document/{coll}", self._insert)
        app.router.add_delete("/_db/{db}/_api/document/{coll}", self._remove)
        app.router.add_post("/_db/{db}/_api/cursor", self._cursor)
        app.router.add_post("/_db/{db}/_api/cursor/{id}", self._next_batch)
        app.router.add_delete("/_db/{db}/_api/cursor/{id}", self._drop_cursor)
        return app

    @property
    def collections(self) -> dict[str, dict[str, Any]]:
        """The collections of the ``fabric`` database (the lane's default)."""
        return self.by_database.setdefault("fabric", {})

    def _db(self, request: web.Request) -> dict[str, dict[str, Any]]:
        name = request.match_info["db"]
        if name not in self.databases:
            raise KeyError(name)
        return self.by_database.setdefault(name, {})

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        expected = "Basic " + base64.b64encode(f"root:{self.password}".encode()).decode()
        if self.password and request.headers.get("Authorization") != expected:
            return _err(401, 401, "not authorized to execute this request")
        if "db" in request.match_info and request.match_info["db"] not in self.databases:
            return _err(404, 1228, "database not found")
        resp: web.StreamResponse = await handler(request)
        return resp

    async def _databases(self, _request: web.Request) -> web.Response:
        return web.json_response({"error": False, "code": 200, "result": self.databases})

    async def _create_database(self, request: web.Request) -> web.Response:
        name = (await request.json())["name"]
        if name in self.databases:
            return _err(409, 1207, "duplicate database name")
        self.databases.append(name)
        self.by_database.setdefault(name, {})
        return web.json_response({"error": False, "code": 201, "result": True}, status=201)

    async def _list(self, request: web.Request) -> web.Response:
        result = [
            {"id": str(i), "name": n, "isSystem": False, "type": c["type"], "status": 3, "globallyUniqueId": n}
            for i, (n, c) in enumerate(self._db(request).items())
        ]
        return web.json_response({"error": False, "code": 200, "result": result})

    async def _create(self, request: web.Request) -> web.Response:
        body = await request.json()
        name = body["name"]
        collections = self._db(request)
        if name in collections:
            return _err(409, 1207, "duplicate name")
        collections[name] = {"type": body.get("type", 2), "docs": {}}
        return web.json_response(
            {
                "id": "1",
                "name": name,
                "type": body.get("type", 2),
                "status": 3,
                "isSystem": False,
                "error": False,
                "code": 200,
            }
        )

    async def _insert(self, request: web.Request) -> web.Response:
        coll = self._db(request).get(request.match_info["coll"])
        if coll is None:
            return _err(404, 1203, "collection or view not found")
        for doc in await request.json():
            coll["docs"][doc["_key"]] = doc
        return web.json_response([], status=202)

    async def _remove(self, request: web.Request) -> web.Response:
        coll = self._db(request).get(request.match_info["coll"])
        if coll is None:
            return _err(404, 1203, "collection or view not found")
        for doc in await request.json():
            coll["docs"].pop(doc["_key"] if isinstance(doc, dict) else doc, None)
        return web.json_response([], status=200)

    def _docs(self, collections: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
        if name not in collections:
            raise KeyError(name)
        docs: dict[str, Any] = collections[name]["docs"]
        return docs

    async def _cursor(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.cursors.append(body)
        if self.hang:
            await asyncio.sleep(60)
        max_runtime = (body.get("options") or {}).get("maxRuntime") or 0
        if self.query_delay_s:
            if max_runtime and self.query_delay_s > max_runtime:
                await asyncio.sleep(max_runtime)
                return _err(410, 1500, "query killed")
            await asyncio.sleep(self.query_delay_s)
        bind = body.get("bindVars") or {}
        collections = self._db(request)
        try:
            if body["query"] == SEARCH_AQL:
                result = self._search(collections, bind)
            elif body["query"] in (_DELETE_MENTIONS, _DELETE_RELATIONS):
                field = "_to" if body["query"] == _DELETE_MENTIONS else "chunk_key"
                values = set(bind.get("t") or bind.get("k") or [])
                docs = self._docs(collections, bind["@c"])
                for key in [k for k, d in docs.items() if d.get(field) in values]:
                    del docs[key]
                result = []
            elif body["query"] == _LIST_IDS:
                result = [d.get("chunk_id") for d in self._docs(collections, bind["@c"]).values()]
            elif body["query"] == _TRIPLES:
                keys = set(bind.get("k") or [])
                rels = self._docs(collections, bind["@c"]).values()
                result = [
                    {"chunk_id": r["chunk_id"], "head": r.get("head"), "type": r["type"], "tail": r.get("tail")}
                    for r in rels
                    if r.get("chunk_key") in keys
                ]
            else:
                return _err(400, 1501, "syntax error, unexpected query")
        except KeyError as exc:
            return _err(404, 1203, f"AQL: collection or view not found: {exc.args[0]}")
        batch = int(body.get("batchSize") or 1000)
        cursor_id = str(len(self.cursors))
        if len(result) > batch:
            self.open_cursors[cursor_id] = (batch, list(result[batch:]))
        return self._batch(result[:batch], cursor_id, 201)

    def _batch(self, rows: list[Any], cursor_id: str, status: int) -> web.Response:
        self.batches.append(len(rows))
        more = cursor_id in self.open_cursors
        body: dict[str, Any] = {
            "result": rows,
            "hasMore": more,
            "cached": False,
            "error": False,
            "code": status,
            "extra": {"warnings": [], "stats": {"executionTime": 0.001}},
        }
        if more:
            body["id"] = cursor_id
        return web.json_response(body, status=status)

    async def _next_batch(self, request: web.Request) -> web.Response:
        cursor_id = request.match_info["id"]
        if cursor_id not in self.open_cursors:
            return _err(404, 1600, "cursor not found")
        size, rest = self.open_cursors.pop(cursor_id)
        if rest[size:]:
            self.open_cursors[cursor_id] = (size, rest[size:])
        return self._batch(rest[:size], cursor_id, 200)

    async def _drop_cursor(self, request: web.Request) -> web.Response:
        if self.open_cursors.pop(request.match_info["id"], None) is None:
            return _err(404, 1600, "cursor not found")
        return web.json_response({"id": request.match_info["id"], "error": False, "code": 202}, status=202)

    def _search(self, collections: dict[str, dict[str, Any]], bind: dict[str, Any]) -> list[dict[str, Any]]:
        entities, relations = self._docs(collections, bind["@entities"]), self._docs(collections, bind["@relations"])
        mentions, chunks = self._docs(collections, bind["@mentions"]), self._docs(collections, bind["chunks"])
        seeds = [e for e in entities.values() if e["name_norm"] in bind["terms"]][: bind["max_seeds"]]
        agg: dict[str, list[float]] = {}

        def walk(vertex: str, used: frozenset[str], length: int) -> None:
            for m in mentions.values():
                if m["_from"] == vertex:
                    key = m["_to"].split("/", 1)[1]
                    hops, score = agg.get(key, [float("inf"), 0.0])
                    agg[key] = [min(hops, length), score + 1 / (1 + length)]
            if length == bind["depth"]:
                return
            for rk, r in relations.items():
                if rk in used or vertex not in (r["_from"], r["_to"]):
                    continue
                walk(r["_to"] if r["_from"] == vertex else r["_from"], used | {rk}, length + 1)

        for seed in seeds:
            walk(f"entities/{seed['_key']}", frozenset(), 0)
        rows = []
        for key, (hops, score) in agg.items():
            doc = chunks.get(key)
            ts = doc.get("published_ts") if doc else None
            if doc is None or (bind["sites"] and doc.get("domain") not in bind["sites"]):
                continue
            if ts is not None and bind["date_from"] is not None and ts < bind["date_from"]:
                continue
            if ts is not None and bind["date_to"] is not None and ts > bind["date_to"]:
                continue
            rows.append({"doc": dict(doc), "hops": int(hops), "score": score})
        rows.sort(key=lambda r: (-r["score"], r["hops"], r["doc"]["_key"]))
        return rows[: bind["top_k"]]
