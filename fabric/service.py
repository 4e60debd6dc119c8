"""The HTTP service behind ``fabric serve``: an aiohttp.web app around one :class:`~fabric.engine.Engine`.

Routes:

``POST /v1/search``
    JSON body with the request fields of :mod:`fabric.validation`; answers ``SearchResult.to_dict()`` (the
    DESIGN.md shape). Validation failures answer ``400 {"error": {"field", "message"}}``; a strict request with
    a partial answer ``503`` with the failed lanes. No error ever returns a traceback.
``GET /healthz``
    Liveness: the process answers.
``GET /readyz``
    Readiness: the engine is open and at least one lane was built (``503`` otherwise), with per-lane health.
``GET /metrics``
    Prometheus text exposition of the engine's own registry.

The engine is opened on start-up and closed on clean-up; bodies are capped (``max_body_bytes``).
"""

from __future__ import annotations

import gc
import json
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from fabric.engine import Engine
from fabric.errors import FabricError, PartialResultError, QueryError
from fabric.validation import parse_request

__all__ = ["ENGINE_KEY", "create_app", "error_body"]

log = structlog.get_logger(__name__)

ENGINE_KEY = web.AppKey("engine", Engine)
"""Where the app keeps its engine."""

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_body(field: str | None, message: str, **extra: Any) -> dict[str, Any]:
    """The one error shape of the API."""
    return {"error": {"field": field, "message": message, **extra}}


@web.middleware
async def _errors(request: web.Request, handler: _Handler) -> web.StreamResponse:
    """Every failure becomes a JSON error; unexpected ones are logged, never echoed with a traceback."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        field = "body" if exc.status == 413 else None
        return web.json_response(error_body(field, exc.reason), status=exc.status)
    except Exception as exc:  # the API edge: log the traceback, answer a clean 500
        log.exception("request_failed", path=request.path, error=type(exc).__name__)
        return web.json_response(error_body(None, "internal error"), status=500)


async def _search(request: web.Request) -> web.Response:
    engine = request.app[ENGINE_KEY]
    if request.content_type != "application/json":
        return web.json_response(error_body("body", "expected Content-Type: application/json"), status=415)
    try:
        data = json.loads(await request.read())
    except (ValueError, UnicodeDecodeError) as exc:
        return web.json_response(error_body("body", f"invalid JSON: {exc}"), status=400)
    if not isinstance(data, dict):
        return web.json_response(error_body("body", "expected a JSON object"), status=400)
    try:
        search_request = parse_request(data, engine.settings)
        result = await engine.search(search_request)
    except PartialResultError as exc:
        return web.json_response(error_body(exc.field, exc.message, lanes=exc.lanes), status=503)
    except QueryError as exc:
        return web.json_response(error_body(exc.field, exc.message), status=400)
    except FabricError as exc:
        log.warning("search_failed", error=str(exc))
        return web.json_response(error_body(None, str(exc)), status=500)
    return web.json_response(result.to_dict())


async def _healthz(_request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def _readyz(request: web.Request) -> web.Response:
    health = request.app[ENGINE_KEY].health()
    ready = bool(health["open"]) and any(lane["built"] for lane in health["lanes"].values())
    body = {"status": "ready" if ready else "not_ready", "lanes": health["lanes"], "inflight": health["inflight"]}
    return web.json_response(body, status=200 if ready else 503, dumps=lambda o: json.dumps(o, default=str))


async def _metrics(request: web.Request) -> web.Response:
    payload = generate_latest(request.app[ENGINE_KEY].metrics.registry)
    resp = web.Response(body=payload)
    resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
    return resp


def create_app(engine: Engine, *, max_body_bytes: int = 64 * 1024) -> web.Application:
    """The service app; it opens ``engine`` on start-up and closes it on clean-up."""
    app = web.Application(middlewares=[_errors], client_max_size=max_body_bytes)
    app[ENGINE_KEY] = engine

    async def on_startup(_app: web.Application) -> None:
        await engine.open()
        # Everything built at start-up (models, stores, config) lives for the process: move it out of the
        # collector's reach so full collections do not pause the loop for tens of ms under load.
        gc.collect()
        gc.freeze()

    async def on_cleanup(_app: web.Application) -> None:
        await engine.aclose()

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    app.router.add_post("/v1/search", _search)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    app.router.add_get("/metrics", _metrics)
    return app
