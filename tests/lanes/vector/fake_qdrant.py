"""A loopback Qdrant stand-in speaking the REST API ``qdrant-client`` uses for the vector lane and its writer.

Endpoints (answers are ``{"result", "status": "ok", "time"}`` like the server's): ``GET /collections/{c}/exists``,
``PUT /collections/{c}`` (create; 409 when it exists), ``PUT /collections/{c}/index`` (payload index),
``PUT /collections/{c}/points`` (upsert ``{"points": [{"id", "vector", "payload"}]}``),
``POST /collections/{c}/points/query`` (exact cosine over the collection's points, ``limit``/``offset``,
``with_payload``) and ``POST /collections/{c}/points/delete`` (by ``filter.must[].match.any`` on a payload key).
A missing collection answers 404 with Qdrant's error shape. Query filters are not evaluated: a request carrying
one is refused with 400 (the tests using this stand-in send none), so a filter is never silently ignored.
"""

from __future__ import annotations

import math
from typing import Any

from aiohttp import web

__all__ = ["FakeQdrant"]


def _ok(result: Any, status: int = 200) -> web.Response:
    return web.json_response({"result": result, "status": "ok", "time": 0.0001}, status=status)


def _err(status: int, message: str) -> web.Response:
    return web.json_response({"status": {"error": message}, "time": 0.0}, status=status)


def _cosine(a: list[float], b: list[float]) -> float:
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(x * x for x in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb) if na and nb else 0.0


class FakeQdrant:
    """In-memory Qdrant: collection name → {"size", "points": id → (vector, payload), "indexes"}."""

    def __init__(self) -> None:
        self.collections: dict[str, dict[str, Any]] = {}

    def app(self) -> web.Application:
        """The aiohttp application."""
        app = web.Application()
        app.router.add_get("/collections/{c}/exists", self._exists)
        app.router.add_put("/collections/{c}", self._create)
        app.router.add_put("/collections/{c}/index", self._index)
        app.router.add_put("/collections/{c}/points", self._upsert)
        app.router.add_post("/collections/{c}/points/query", self._query)
        app.router.add_post("/collections/{c}/points/delete", self._delete)
        return app

    def _get(self, request: web.Request) -> dict[str, Any] | None:
        return self.collections.get(request.match_info["c"])

    async def _exists(self, request: web.Request) -> web.Response:
        return _ok({"exists": self._get(request) is not None})

    async def _create(self, request: web.Request) -> web.Response:
        name = request.match_info["c"]
        if name in self.collections:
            return _err(409, f"Wrong input: Collection `{name}` already exists!")
        body = await request.json()
        self.collections[name] = {"size": body["vectors"]["size"], "points": {}, "indexes": []}
        return _ok(True)

    async def _index(self, request: web.Request) -> web.Response:
        coll = self._get(request)
        if coll is None:
            return _err(404, "Not found: Collection does not exist")
        coll["indexes"].append((await request.json())["field_name"])
        return _ok({"operation_id": 0, "status": "completed"})

    async def _upsert(self, request: web.Request) -> web.Response:
        coll = self._get(request)
        if coll is None:
            return _err(404, "Not found: Collection does not exist")
        for p in (await request.json())["points"]:
            if len(p["vector"]) != coll["size"]:
                return _err(400, "Wrong input: Vector dimension error")
            coll["points"][str(p["id"])] = (list(p["vector"]), dict(p.get("payload") or {}))
        return _ok({"operation_id": 1, "status": "completed"})

    async def _query(self, request: web.Request) -> web.Response:
        coll = self._get(request)
        if coll is None:
            return _err(404, "Not found: Collection does not exist")
        body = await request.json()
        if body.get("filter"):
            return _err(400, "this stand-in does not evaluate filters")
        vector = body["query"]
        if isinstance(vector, dict):  # {"nearest": [...]}, the SDK's form of a plain vector query
            vector = vector.get("nearest")
        if not isinstance(vector, list) or len(vector) != coll["size"]:
            return _err(400, "Wrong input: only a nearest-vector query of the collection's size is supported")
        scored = sorted(
            ((_cosine(vector, v), pid, payload) for pid, (v, payload) in coll["points"].items()),
            key=lambda t: (-t[0], t[1]),
        )
        offset, limit = int(body.get("offset") or 0), int(body.get("limit") or 10)
        points = [
            {"id": pid, "version": 1, "score": score, "payload": payload if body.get("with_payload") else None}
            for score, pid, payload in scored[offset : offset + limit]
        ]
        return _ok({"points": points})

    async def _delete(self, request: web.Request) -> web.Response:
        coll = self._get(request)
        if coll is None:
            return _err(404, "Not found: Collection does not exist")
        must = ((await request.json()).get("filter") or {}).get("must") or []
        for cond in must:
            drop = set(cond["match"]["any"])
            for pid in [p for p, (_, payload) in coll["points"].items() if payload.get(cond["key"]) in drop]:
                del coll["points"][pid]
        return _ok({"operation_id": 2, "status": "completed"})
