"""Reading request bodies and answering errors, the same way on every route: one JSON error shape
(``{"error": {"field", "message"}}``), bodies capped and timed, JSON decoded with bounded depth and valid Unicode.

A body may be sent compressed: ``Content-Encoding: gzip`` or ``deflate`` (aiohttp decodes it as it arrives; the caps
count decoded bytes). Any other coding (``br``, ``x-gzip``, ``gzip, gzip``, several headers) is a ``400`` naming
``Content-Encoding``, and a body that does not decode as its coding says (``gzip`` on plain JSON, a truncated
stream) a ``400`` naming ``body``, on every route that reads a body (:func:`read_capped`, :func:`spool_body`),
``/mcp`` included; never a ``500``."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, Any

from aiohttp import web

from fabric.core import safejson
from fabric.core.logs import get_logger
from fabric.serve.limits.server import CONNECTION_GUARD_KEY, body_timeout, read_body

__all__ = ["BodyError", "error_body", "json_errors", "read_capped", "read_json", "spool_body"]

log = get_logger(__name__)
_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_SPOOL_BATCH = 1 << 18
"""Bytes of a spooled body gathered before one write to its file (:func:`spool_body`)."""
_BODY_HEADERS = frozenset({"content-type", "content-length", "content-encoding", "transfer-encoding"})
_CODINGS = frozenset({"", "identity", "gzip", "deflate"})
"""``Content-Encoding`` values a body may carry (case-insensitive): aiohttp decodes gzip and deflate."""


def error_body(field: str | None, message: str, **extra: Any) -> dict[str, Any]:
    """The one error shape of the API."""
    return {"error": {"field": field, "message": message, **extra}}


@web.middleware
async def json_errors(request: web.Request, handler: _Handler) -> web.StreamResponse:
    """Every failure becomes a JSON error, keeping the exception's headers but those of its text body (a ``405``
    keeps its ``Allow``, RFC 9110); unexpected ones are logged, never echoed with a traceback."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        field = "body" if exc.status == 413 else None
        kept = {k: v for k, v in exc.headers.items() if k.lower() not in _BODY_HEADERS}  # Allow of a 405, ...
        return web.json_response(error_body(field, exc.reason), status=exc.status, headers=kept)
    except Exception as exc:  # the API edge: log the traceback, answer a clean 500
        log.exception("request_failed", path=request.path, error=type(exc).__name__)
        return web.json_response(error_body(None, "internal error"), status=500)


class BodyError(Exception):
    """A request body that cannot be used; carries the response to answer."""

    def __init__(self, response: web.Response) -> None:
        self.response = response


def _too_large(limit: int) -> BodyError:
    return BodyError(
        web.json_response(error_body("body", f"body larger than {limit} bytes", limit_bytes=limit), status=413)
    )


def _check_coding(request: web.Request) -> None:
    """Refuse a body in a content coding the service does not decode (a ``400`` naming ``Content-Encoding``)."""
    codings = request.headers.getall("Content-Encoding", [])
    if len(codings) > 1 or (codings and codings[0].lower() not in _CODINGS):
        shown = ", ".join(codings)[:60]
        msg = f"unsupported content coding {shown!r}: send the body as is, or as gzip or deflate"
        raise BodyError(web.json_response(error_body("Content-Encoding", msg), status=400))


def _undecodable(request: web.Request) -> BodyError:
    """A body aiohttp could not decode: not in its ``Content-Encoding``, or a broken chunked framing."""
    coding = request.headers.get("Content-Encoding", "").lower()
    msg = "the body is malformed (its chunked framing or length)"
    if coding not in ("", "identity"):
        msg = f"the body is not valid {coding} data (Content-Encoding: {coding})"
    return BodyError(web.json_response(error_body("body", msg), status=400))


def _late(request: web.Request) -> BodyError:
    guard = request.app.get(CONNECTION_GUARD_KEY)
    if guard is not None:
        guard.metrics.body_timeouts.inc()
    return BodyError(web.json_response(error_body("body", "request body not received in time"), status=408))


async def read_capped(request: web.Request, limit: int) -> bytes:
    """The raw body, read up to ``limit`` bytes within the body timeout (:func:`body_timeout`).

    Raises:
        BodyError: over the limit (413, before reading when ``Content-Length`` says so), not received within
            the body timeout (408), or in a content coding that is unsupported or does not decode (400).
    """
    _check_coding(request)
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(limit)  # refused before reading it
    try:
        buf = await read_body(request, limit, body_timeout(request))
    except web.RequestPayloadError:
        raise _undecodable(request) from None
    if buf is None:
        raise BodyError(web.json_response(error_body("body", "request body not received in time"), status=408))
    if len(buf) > limit:
        raise _too_large(limit)
    return buf


def _anonymous_file(directory: Path) -> IO[bytes]:
    return tempfile.TemporaryFile(dir=directory)  # returned open: the caller closes it


async def spool_body(request: web.Request, limit: int, directory: Path) -> IO[bytes]:
    """The body written to an anonymous file in ``directory`` (rewound; the caller closes it), read like
    :func:`read_capped` but never held in memory: at most :data:`_SPOOL_BATCH` bytes at a time.

    Raises:
        BodyError: not ``application/json`` (415), over the limit (413), late (408), or in a content coding that
            is unsupported or does not decode (400).
    """
    if request.content_type != "application/json":
        raise BodyError(web.json_response(error_body("body", "expected Content-Type: application/json"), status=415))
    _check_coding(request)
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(limit)
    fh = await asyncio.to_thread(_anonymous_file, directory)
    try:
        size, batch = 0, bytearray()
        async with asyncio.timeout(body_timeout(request)):
            async for chunk in request.content.iter_chunked(1 << 16):
                size += len(chunk)
                if size > limit:
                    raise _too_large(limit)
                batch += chunk
                if len(batch) >= _SPOOL_BATCH:
                    await asyncio.to_thread(fh.write, batch)
                    batch = bytearray()
        await asyncio.to_thread(fh.write, batch)
        fh.seek(0)
    except TimeoutError:
        fh.close()
        raise _late(request) from None
    except web.RequestPayloadError:
        fh.close()
        raise _undecodable(request) from None
    except BaseException:
        fh.close()
        raise
    return fh


async def read_json(request: web.Request, limit: int, *, in_thread: bool = False) -> Any:
    """The decoded JSON body, read up to ``limit`` bytes.

    Raises:
        BodyError: wrong content type (415), over the limit (413), not received within the body timeout (408,
            :mod:`fabric.serve.limits.server`), or invalid JSON (400): malformed, nested
            deeper than 64 levels, ``NaN``, or a lone surrogate (the field named, e.g. ``entries[3].text``).
    """
    if request.content_type != "application/json":
        raise BodyError(web.json_response(error_body("body", "expected Content-Type: application/json"), status=415))
    buf = await read_capped(request, limit)
    try:  # depth-bounded, lone surrogates refused naming the field (fabric.core.safejson)
        return await asyncio.to_thread(safejson.loads, buf) if in_thread else safejson.loads(buf)
    except safejson.JSONInputError as exc:
        raise BodyError(web.json_response(error_body(exc.where or "body", exc.reason), status=400)) from None
