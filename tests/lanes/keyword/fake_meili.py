"""A loopback Meilisearch stand-in speaking the documented REST API (indexes, settings, documents, tasks, search).

Behaviour follows the API reference: writes answer ``202`` with a summarised task (``taskUid``, ``status:
enqueued``) and finish asynchronously (``GET /tasks/{uid}``: ``processing`` then ``succeeded``/``failed``);
errors are ``{"message", "code", "type", "link"}`` with 401/403/404/400; search honours ``q``, ``limit``,
``filter`` (array form, ``AND``-ed; ``OR``, ``>=``, ``<=``, ``=``, ``IN [...]``, ``IS NULL`` and escaped string
literals) and ``showRankingScore`` (``_rankingScore`` in 0..1); ``POST /indexes/{uid}/documents/fetch`` lists
documents in insertion order with ``fields``, ``limit`` (default 20) and ``offset``, answering the documented page
``{"results", "offset", "limit", "total"}``.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from aiohttp import web

__all__ = ["FakeMeili"]

_TOKEN = re.compile(r'\s*(?:("(?:\\.|[^"\\])*")|(-?\d+(?:\.\d+)?)|(>=|<=|!=|=|>|<|\[|\]|,)|([A-Za-z_][\w.]*))')


def _tokens(expr: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos = 0
    expr = expr.strip()
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m or m.end() == pos:
            raise ValueError(f"bad filter near {expr[pos:]!r}")
        s, n, op, word = m.groups()
        if s is not None:
            out.append(("str", re.sub(r"\\(.)", r"\1", s[1:-1])))
        elif n is not None:
            out.append(("num", float(n)))
        elif op is not None:
            out.append(("op", op))
        else:
            out.append(("word", word))
        pos = m.end()
    return out


def _matches(expr: str, doc: dict[str, Any], filterable: set[str]) -> bool:
    toks = _tokens(expr)
    i = 0

    def term() -> bool:
        nonlocal i
        field = toks[i][1]
        if field not in filterable:
            raise KeyError(field)
        kind, op = toks[i + 1]
        value = doc.get(field)
        if kind == "word" and op.upper() == "IS":
            i += 3
            return value is None
        if kind == "word" and op.upper() == "IN":
            i += 3
            vals = []
            while toks[i] != ("op", "]"):
                if toks[i][0] != "op":
                    vals.append(toks[i][1])
                i += 1
            i += 1
            return value in vals
        rhs = toks[i + 2][1]
        i += 3
        if value is None:
            return False
        return {
            ">=": value >= rhs,
            "<=": value <= rhs,
            "=": value == rhs,
            "!=": value != rhs,
            ">": value > rhs,
            "<": value < rhs,
        }[op]

    result = term()
    while i < len(toks):
        if toks[i][1].upper() == "OR":
            i += 1
            result = term() or result
        elif toks[i][1].upper() == "AND":
            i += 1
            result = term() and result
        else:
            raise ValueError("bad filter")
    return result


def _err(status: int, code: str, message: str, kind: str = "invalid_request") -> web.Response:
    return web.json_response(
        {"message": message, "code": code, "type": kind, "link": f"https://docs.meilisearch.com/errors#{code}"},
        status=status,
    )


class FakeMeili:
    """In-memory Meilisearch. ``master_key`` enables auth; ``delay_s`` slows search; ``hang`` never answers."""

    def __init__(self, master_key: str = "") -> None:
        self.master_key = master_key
        self.indexes: dict[str, dict[str, Any]] = {}
        self.tasks: dict[int, dict[str, Any]] = {}
        self.searches: list[dict[str, Any]] = []
        self.delay_s = 0.0
        self.hang = False
        self.status_override: int | None = None
        self.fetches: list[dict[str, Any]] = []

    def app(self) -> web.Application:
        """The aiohttp application."""
        app = web.Application(middlewares=[self._auth])
        app.router.add_get("/health", self._health)
        app.router.add_post("/indexes", self._create_index)
        app.router.add_patch("/indexes/{uid}/settings", self._settings)
        app.router.add_post("/indexes/{uid}/documents", self._add_documents)
        app.router.add_post("/indexes/{uid}/documents/delete-batch", self._delete_batch)
        app.router.add_post("/indexes/{uid}/documents/fetch", self._fetch_documents)
        app.router.add_post("/indexes/{uid}/search", self._search)
        app.router.add_get("/tasks/{uid}", self._task)
        return app

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if self.master_key and request.path != "/health":
            auth = request.headers.get("Authorization", "")
            if not auth:
                return _err(401, "missing_authorization_header", "The Authorization header is missing.", "auth")
            if auth != f"Bearer {self.master_key}":
                return _err(403, "invalid_api_key", "The provided API key is invalid.", "auth")
        resp: web.StreamResponse = await handler(request)
        return resp

    async def _health(self, _request: web.Request) -> web.Response:
        return web.json_response({"status": "available"})

    def _enqueue(self, index: str, kind: str, error: dict[str, Any] | None = None) -> web.Response:
        uid = len(self.tasks)
        self.tasks[uid] = {"uid": uid, "indexUid": index, "type": kind, "polls": 0, "error": error}
        return web.json_response(
            {
                "taskUid": uid,
                "indexUid": index,
                "status": "enqueued",
                "type": kind,
                "enqueuedAt": "2025-01-01T00:00:00Z",
            },
            status=202,
        )

    async def _task(self, request: web.Request) -> web.Response:
        task = self.tasks.get(int(request.match_info["uid"]))
        if task is None:
            return _err(404, "task_not_found", "Task not found.")
        task["polls"] += 1
        status = "processing" if task["polls"] < 2 else ("failed" if task["error"] else "succeeded")
        body = {k: v for k, v in task.items() if k != "polls"} | {"status": status}
        return web.json_response(body)

    async def _create_index(self, request: web.Request) -> web.Response:
        body = await request.json()
        uid = body["uid"]
        if uid in self.indexes:
            return self._enqueue(uid, "indexCreation", {"code": "index_already_exists", "message": "exists"})
        self.indexes[uid] = {"primaryKey": body.get("primaryKey"), "docs": {}, "settings": {}}
        return self._enqueue(uid, "indexCreation")

    def _index(self, request: web.Request) -> dict[str, Any] | None:
        return self.indexes.get(request.match_info["uid"])

    async def _settings(self, request: web.Request) -> web.Response:
        index = self._index(request)
        if index is None:
            return _err(404, "index_not_found", "Index not found.")
        index["settings"].update(await request.json())
        return self._enqueue(request.match_info["uid"], "settingsUpdate")

    async def _add_documents(self, request: web.Request) -> web.Response:
        uid = request.match_info["uid"]
        index = self.indexes.setdefault(uid, {"primaryKey": None, "docs": {}, "settings": {}})
        key = request.query.get("primaryKey") or index["primaryKey"] or "id"
        docs = await request.json()
        bad = [d for d in docs if not re.fullmatch(r"[A-Za-z0-9_-]{1,511}", str(d.get(key, "")))]
        if bad:
            return self._enqueue(uid, "documentAdditionOrUpdate", {"code": "invalid_document_id", "message": "bad id"})
        for doc in docs:
            index["docs"][str(doc[key])] = doc
        return self._enqueue(uid, "documentAdditionOrUpdate")

    async def _delete_batch(self, request: web.Request) -> web.Response:
        index = self._index(request)
        if index is None:
            return _err(404, "index_not_found", "Index not found.")
        for key in await request.json():
            index["docs"].pop(str(key), None)
        return self._enqueue(request.match_info["uid"], "documentDeletion")

    async def _fetch_documents(self, request: web.Request) -> web.Response:
        index = self._index(request)
        if index is None:
            return _err(404, "index_not_found", f"Index `{request.match_info['uid']}` not found.")
        body = await request.json()
        self.fetches.append(body)
        offset, limit, fields = int(body.get("offset", 0)), int(body.get("limit", 20)), body.get("fields")
        if offset < 0 or limit < 0:
            return _err(400, "invalid_document_offset", "offset and limit must be positive integers.")
        docs = list(index["docs"].values())
        page = [d if not fields else {k: d[k] for k in fields if k in d} for d in docs[offset : offset + limit]]
        return web.json_response({"results": page, "offset": offset, "limit": limit, "total": len(docs)})

    async def _search(self, request: web.Request) -> web.Response:
        if self.hang:
            await asyncio.sleep(60)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.status_override:
            return _err(self.status_override, "internal", "forced", "internal")
        index = self._index(request)
        if index is None:
            return _err(404, "index_not_found", f"Index `{request.match_info['uid']}` not found.")
        body = await request.json()
        self.searches.append(body)
        filterable = set(index["settings"].get("filterableAttributes", []))
        words = re.findall(r"\w+", body.get("q", "").lower())
        scored = []
        for doc in index["docs"].values():
            try:
                if not all(_matches(f, doc, filterable) for f in body.get("filter", [])):
                    continue
            except KeyError as exc:
                return _err(400, "invalid_search_filter", f"Attribute `{exc.args[0]}` is not filterable.")
            tokens = set(re.findall(r"\w+", f"{doc.get('title', '')} {doc.get('text', '')}".lower()))
            hit = sum(1 for w in words if w in tokens)
            if hit or not words:
                scored.append((hit / max(len(words), 1), doc))
        scored.sort(key=lambda p: -p[0])
        hits = []
        for score, doc in scored[: body.get("limit", 20)]:
            out = dict(doc)
            if body.get("showRankingScore"):
                out["_rankingScore"] = round(score, 4)
            hits.append(out)
        return web.json_response(
            {
                "hits": hits,
                "query": body.get("q", ""),
                "processingTimeMs": 0,
                "limit": body.get("limit", 20),
                "offset": 0,
                "estimatedTotalHits": len(scored),
            }
        )
