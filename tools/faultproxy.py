"""An in-process HTTP fault proxy for tests and benchmarks: put it in front of any HTTP lane's upstream.

:class:`FaultProxy` listens on ``127.0.0.1`` (an ephemeral port) and forwards every request to one upstream
base URL through a guarded session (:mod:`fabric.net.httpclient`), unless a fault is armed. A lane pointed at
``proxy.url`` instead of its upstream then meets, on demand:

=================  =====================================================================================
``hang``           never answers (until the proxy closes)
``slow_body``      sends the headers at once, then the upstream body ``chunk_bytes`` every ``delay_s``
``reset``          resets the TCP connection (RST) without answering
``status``         answers ``status`` (default 503) with a short text body
``rate_limited``   answers 429 with ``Retry-After: retry_after_s``
``malformed``      answers 200 ``application/json`` with a truncated JSON body
``oversized``      answers 200 with ``size_bytes`` of JSON-looking padding (streamed, no Content-Length)
``deep``           answers 200 with a JSON body nested ``depth`` levels (default 100,000)
``bad_unicode``    forwards the upstream answer with a lone surrogate (``\\ud800`` escapes in JSON strings,
                   the bytes ``ED A0 80`` in any other body) added to its text
=================  =====================================================================================

:meth:`FaultProxy.arm` takes ``times`` (how many requests get the fault before the proxy passes through again,
None: until :meth:`FaultProxy.disarm`), so a test can model a provider that recovers. :attr:`FaultProxy.seen`
counts requests per fault (``"pass"`` for forwarded ones).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from aiohttp import web
from yarl import URL

from fabric.net.httpclient import AllowList, HostRule, create_session

__all__ = ["Fault", "FaultPlan", "FaultProxy", "inject_bad_unicode"]

_HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host", "upgrade"}
)


class Fault(StrEnum):
    """The faults a :class:`FaultProxy` can serve."""

    HANG = "hang"
    SLOW_BODY = "slow_body"
    RESET = "reset"
    STATUS = "status"
    RATE_LIMITED = "rate_limited"
    MALFORMED = "malformed"
    OVERSIZED = "oversized"
    DEEP = "deep"
    BAD_UNICODE = "bad_unicode"


@dataclass(slots=True)
class FaultPlan:
    """An armed fault and its parameters (see the module docstring)."""

    fault: Fault
    times: int | None = None
    status: int = 503
    retry_after_s: int = 30
    delay_s: float = 0.05
    chunk_bytes: int = 64
    size_bytes: int = 8 * 1024 * 1024
    depth: int = 100_000
    served: int = field(default=0, init=False)


def inject_bad_unicode(body: bytes) -> bytes:
    """``body`` with a lone surrogate added to its text: to every JSON string that is not a URL, else raw bytes."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return body.replace(b">", b">\xed\xa0\x80", 8) if b">" in body else body + b"\xed\xa0\x80"

    def spoil(node: Any) -> Any:
        if isinstance(node, str):
            return node if node.startswith(("http://", "https://", "/")) else node + "\ud800"
        if isinstance(node, list):
            return [spoil(v) for v in node]
        if isinstance(node, dict):
            return {k: spoil(v) for k, v in node.items()}
        return node

    return json.dumps(spoil(doc)).encode()  # ensure_ascii: the surrogate travels as the escape \ud800


class FaultProxy:
    """A loopback HTTP proxy to ``upstream`` that serves armed faults (use ``async with``).

    Args:
        upstream: base URL requests are forwarded to (path and query appended).
        private_ok: whether the upstream may be a private/loopback address (tests: yes).
    """

    def __init__(self, upstream: str, *, private_ok: bool = True) -> None:
        self.upstream = URL(upstream)
        self._allow = AllowList.of([HostRule.from_url(upstream, private_ok=private_ok)])
        self.plan: FaultPlan | None = None
        self.seen: Counter[str] = Counter()
        self._closing = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._http: Any = None
        self.url = ""
        """The proxy's base URL (``http://127.0.0.1:<port>``), set by :meth:`start`."""

    def arm(self, fault: Fault | str, *, times: int | None = None, **params: Any) -> FaultPlan:
        """Serve ``fault`` to the next ``times`` requests (None: until :meth:`disarm`)."""
        self.plan = FaultPlan(Fault(fault), times, **params)
        return self.plan

    def disarm(self) -> None:
        """Forward every request again."""
        self.plan = None

    async def start(self) -> str:
        """Listen on an ephemeral loopback port; returns :attr:`url`."""
        self._http = create_session(self._allow, total_timeout_s=60.0)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def close(self) -> None:
        """Release hung requests, stop listening, close the upstream session."""
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def __aenter__(self) -> FaultProxy:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    def _take(self) -> FaultPlan | None:
        plan = self.plan
        if plan is None or (plan.times is not None and plan.served >= plan.times):
            return None
        plan.served += 1
        return plan

    async def _forward(self, request: web.Request) -> tuple[int, dict[str, str], bytes]:
        target = self.upstream.with_path(self.upstream.path.rstrip("/") + request.path).with_query(request.query)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        body = await request.read()
        async with self._http.request(
            request.method, target, headers=headers, data=body or None, allow_redirects=False
        ) as resp:
            out = {k: v for k, v in resp.headers.items() if k.lower() not in _HOP_HEADERS}
            return resp.status, out, await resp.read()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        plan = self._take()
        self.seen[plan.fault.value if plan else "pass"] += 1
        if plan is None:
            status, headers, body = await self._forward(request)
            return web.Response(status=status, headers=headers, body=body)
        return await _SERVE[plan.fault](self, request, plan)

    async def _hang(self, _request: web.Request, _plan: FaultPlan) -> web.StreamResponse:
        await self._closing.wait()
        return web.Response(status=503, text="proxy closing")

    async def _slow_body(self, request: web.Request, plan: FaultPlan) -> web.StreamResponse:
        status, headers, body = await self._forward(request)
        resp = web.StreamResponse(status=status, headers=headers)
        await resp.prepare(request)
        with contextlib.suppress(ConnectionResetError):  # the client gave up on the trickle: nothing to finish
            for start in range(0, len(body), plan.chunk_bytes):
                with contextlib.suppress(TimeoutError):  # not wait_for, which can drop a cancellation on 3.11
                    async with asyncio.timeout(plan.delay_s):
                        await self._closing.wait()
                if self._closing.is_set():
                    break
                await resp.write(body[start : start + plan.chunk_bytes])
            await resp.write_eof()
        return resp

    async def _reset(self, request: web.Request, _plan: FaultPlan) -> web.StreamResponse:
        transport = request.transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is not None:  # linger 0: close() sends RST instead of FIN
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        if transport is not None:
            transport.abort()
        raise asyncio.CancelledError  # nothing more is written on this connection

    async def _status(self, _request: web.Request, plan: FaultPlan) -> web.StreamResponse:
        return web.Response(status=plan.status, text=f"fault proxy: HTTP {plan.status}")

    async def _rate_limited(self, _request: web.Request, plan: FaultPlan) -> web.StreamResponse:
        headers = {"Retry-After": str(plan.retry_after_s)}
        return web.Response(status=429, text="fault proxy: too many requests", headers=headers)

    async def _malformed(self, _request: web.Request, _plan: FaultPlan) -> web.StreamResponse:
        return web.Response(body=b'{"results": [{"title": "trunc', content_type="application/json")

    async def _oversized(self, request: web.Request, plan: FaultPlan) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        await resp.write(b'{"results": [], "pad": "')
        block = b"x" * 65536
        sent = 0
        with contextlib.suppress(ConnectionError):  # the client stops reading at its cap
            while sent < plan.size_bytes and not self._closing.is_set():
                await resp.write(block)
                sent += len(block)
            await resp.write(b'"}')
            await resp.write_eof()
        return resp

    async def _deep(self, _request: web.Request, plan: FaultPlan) -> web.StreamResponse:
        body = b'{"results": ' + b"[" * plan.depth + b"]" * plan.depth + b"}"
        return web.Response(body=body, content_type="application/json")

    async def _bad_unicode(self, request: web.Request, _plan: FaultPlan) -> web.StreamResponse:
        status, headers, body = await self._forward(request)
        return web.Response(status=status, headers=headers, body=inject_bad_unicode(body))


_SERVE = {
    Fault.HANG: FaultProxy._hang,
    Fault.SLOW_BODY: FaultProxy._slow_body,
    Fault.RESET: FaultProxy._reset,
    Fault.STATUS: FaultProxy._status,
    Fault.RATE_LIMITED: FaultProxy._rate_limited,
    Fault.MALFORMED: FaultProxy._malformed,
    Fault.OVERSIZED: FaultProxy._oversized,
    Fault.DEEP: FaultProxy._deep,
    Fault.BAD_UNICODE: FaultProxy._bad_unicode,
}
