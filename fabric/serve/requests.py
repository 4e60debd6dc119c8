"""Reading request bodies and answering errors, the same way on every route: one JSON error shape
(``{"error": {"field", "message"}}``), bodies capped and timed, JSON decoded with bounded depth and valid Unicode."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from fabric.core import safejson
from fabric.core.logs import get_logger
from fabric.serve.limits.server import CONNECTION_GUARD_KEY, ServerLimits, read_body

__all__ = ["BodyError", "error_body", "json_errors", "read_json"]

log = get_logger(__name__)
_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_body(field: str | None, message: str, **extra: Any) -> dict[str, Any]:
    """The one error shape of the API."""
    return {"error": {"field": field, "message": message, **extra}}


@web.middleware
async def json_errors(request: web.Request, handler: _Handler) -> web.StreamResponse:
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


class BodyError(Exception):
    """A request body that cannot be used; carries the response to answer."""

    def __init__(self, response: web.Response) -> None:
        self.response = response


async def read_json(request: web.Request, limit: int, *, in_thread: bool = False) -> Any:
    """The decoded JSON body, read up to ``limit`` bytes.

    Raises:
        BodyError: wrong content type (415), over the limit (413), not received within the body timeout (408,
            :mod:`fabric.serve.limits.server`), or invalid JSON (400): malformed, nested
            deeper than 64 levels, ``NaN``, or a lone surrogate (the field named, e.g. ``entries[3].text``).
    """
    if request.content_type != "application/json":
        raise BodyError(web.json_response(error_body("body", "expected Content-Type: application/json"), status=415))
    too_large = BodyError(
        web.json_response(error_body("body", f"body larger than {limit} bytes", limit_bytes=limit), status=413)
    )
    if request.content_length is not None and request.content_length > limit:
        raise too_large  # refused before reading it
    conn_guard = request.app.get(CONNECTION_GUARD_KEY)
    buf = await read_body(request, limit, (conn_guard.limits if conn_guard else ServerLimits()).body_timeout_s)
    if buf is None:
        raise BodyError(web.json_response(error_body("body", "request body not received in time"), status=408))
    if len(buf) > limit:
        raise too_large
    try:  # depth-bounded, lone surrogates refused naming the field (fabric.core.safejson)
        return await asyncio.to_thread(safejson.loads, bytes(buf)) if in_thread else safejson.loads(buf)
    except safejson.JSONInputError as exc:
        raise BodyError(web.json_response(error_body(exc.where or "body", exc.reason), status=400)) from None
