"""The service's HTTP/1.1 connection handler: requests aiohttp refuses before any handler runs answer the API's JSON.

aiohttp parses the request line and headers before the app (and its middlewares) see a request; a line longer than
``max_line_size``, a header field longer than ``max_field_size``, a malformed request line or header, and a
failure outside every middleware are answered by the connection handler itself, as ``text/plain`` without the
service's headers. :class:`ServiceRunner` (the runner of ``fabric serve`` and of the tests' live services) answers
them in the service's shape instead: ``{"error": {"field": null, "message"}}``, ``application/json``,
``X-Request-Id`` and ``Connection: close`` (the connection cannot be trusted further).

The limits themselves are the app's (:data:`HANDLER_ARGS`, ``create_app``'s ``handler_args``): a request line of up
to :data:`MAX_LINE_BYTES` bytes, so that every URL the OpenAPI document allows fits (1 024 characters per
parameter, each up to 12 bytes percent-encoded) and is answered by the route, never by the parser.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from fabric.core.logs import new_trace_id

__all__ = ["HANDLER_ARGS", "MAX_FIELD_BYTES", "MAX_LINE_BYTES", "ServiceRunner", "error_response"]

MAX_LINE_BYTES = 64 * 1024
"""Longest request line (and header line) the parser accepts; aiohttp's default is 8 190."""
MAX_FIELD_BYTES = 16 * 1024
"""Longest header field the parser accepts."""
HANDLER_ARGS: dict[str, Any] = {"max_line_size": MAX_LINE_BYTES, "max_field_size": MAX_FIELD_BYTES}
"""The connection handler's limits, set on the app (:func:`fabric.serve.service.create_app`)."""


def error_response(status: int, message: str) -> web.Response:
    """The API's error answer for a request no route saw: JSON, a fresh ``X-Request-Id``, the connection closed."""
    body = json.dumps({"error": {"field": None, "message": message}})
    resp = web.Response(status=status, text=body, content_type="application/json")
    resp.headers["X-Request-Id"] = new_trace_id()
    resp.headers["Connection"] = "close"
    resp.force_close()
    return resp


def _message(status: int, exc: BaseException | None) -> str:
    if isinstance(exc, LineTooLong):
        return f"request line or header field longer than {exc.args[1]} bytes"
    if isinstance(exc, BadHttpMessage):
        return "malformed HTTP request"
    return "request timed out" if status == 504 else "internal error"


class _Handler(RequestHandler):
    """aiohttp's connection handler, answering its own errors in the API's shape."""

    def handle_error(
        self, request: BaseRequest, status: int = 500, exc: BaseException | None = None, message: str | None = None
    ) -> web.StreamResponse:
        super().handle_error(request, status, exc, message)  # logs it (and refuses once a response was sent)
        return error_response(status, _message(status, exc))


class _Server(web.Server):
    def __call__(self) -> RequestHandler:
        return _Handler(self, loop=self._loop, **self._kwargs)


class ServiceRunner(web.AppRunner):
    """An :class:`aiohttp.web.AppRunner` whose connections answer parser errors as the API does (module docstring)."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _Server  # the app builds a plain web.Server (Application._make_handler): same state
        return server
