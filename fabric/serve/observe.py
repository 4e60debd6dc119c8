"""What an operator sees of every request: one access-log line, HTTP metrics by route and status, a trace id.

The outermost middleware of the service (:func:`observe`):

- gives the request an id (the caller's ``X-Request-Id`` when it is a sane token, else a new one), bound to every log
  line written while it runs (``request_id``) and answered as ``X-Request-Id``; a search's access line carries the
  answer's own ``trace_id`` (the engine's lines carry it too), any other request's the request id;
- counts ``fabric_http_requests_total{route, method, status}`` and times
  ``fabric_http_request_duration_seconds{route, tenant}`` (route: the matched pattern, never the raw path);
- logs ``http_request`` with method, path, status, duration, tenant, key id (never the key), trace id and bytes.

``fabric_store_writable`` follows the home's write probe at every scrape; the process and build series are the
engine's (:func:`fabric.query.metrics.process_series`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from fabric.core.logs import get_logger, new_trace_id
from fabric.serve.auth import identified

__all__ = ["HTTP_METRICS_KEY", "TRACE_KEY", "HttpMetrics", "observe"]

TRACE_KEY = web.RequestKey("fabric_trace_id", str)
"""Request key a handler sets to the trace id of the answer it served (``POST /v1/search``)."""

log = get_logger("fabric.serve.access")

_REQUEST_ID = re.compile(r"^[A-Za-z0-9_.:-]{8,64}$")
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0)


class HttpMetrics:
    """The service's HTTP series, in the engine's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "fabric_http_requests", "HTTP requests answered", ["route", "method", "status"], registry=registry
        )
        self.duration = Histogram(
            "fabric_http_request_duration_seconds", "HTTP request duration", ["route", "tenant"],
            buckets=_LATENCY_BUCKETS, registry=registry,
        )  # fmt: skip
        self.store_writable = Gauge(
            "fabric_store_writable", "1 when the home's stores can be written, 0 when not", registry=registry
        )


HTTP_METRICS_KEY = web.AppKey("http_metrics", HttpMetrics)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _route(request: web.Request) -> str:
    info = request.match_info
    resource = info.route.resource if info.http_exception is None else None
    return resource.canonical if resource is not None else "unmatched"


@web.middleware
async def observe(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Request id, metrics and the access-log line of one request (see the module docstring)."""
    given = request.headers.get("X-Request-Id", "")
    request_id = given if _REQUEST_ID.match(given) else new_trace_id()
    tokens = structlog.contextvars.bind_contextvars(request_id=request_id)
    start = time.perf_counter()
    status, size = 500, 0
    try:
        response = await handler(request)
        status, size = response.status, _size(response)
        if not response.prepared:
            response.headers["X-Request-Id"] = request_id
        return response
    except web.HTTPException as exc:
        status = exc.status
        exc.headers["X-Request-Id"] = request_id
        raise
    finally:
        _account(request, status, size, time.perf_counter() - start, request.get(TRACE_KEY) or request_id)
        structlog.contextvars.reset_contextvars(**tokens)


def _size(response: web.StreamResponse) -> int:
    if response.prepared:
        return response.body_length
    body = getattr(response, "body", None)
    return len(body) if isinstance(body, bytes | bytearray) else 0


def _account(request: web.Request, status: int, size: int, seconds: float, trace: str) -> None:
    route, who = _route(request), identified(request)
    tenant, key_id = (who.tenant, who.key_id) if who is not None else (None, None)
    metrics = request.app.get(HTTP_METRICS_KEY)
    if metrics is not None:
        metrics.requests.labels(route, request.method, str(status)).inc()
        metrics.duration.labels(route, tenant or "-").observe(seconds)
    log.info(
        "http_request", method=request.method, path=request.path, route=route, status=status,
        duration_ms=round(seconds * 1000, 2), tenant=tenant, key_id=key_id, trace_id=trace, bytes=size,
        remote=request.remote,
    )  # fmt: skip
