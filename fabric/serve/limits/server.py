"""The HTTP server's own limits: header and body read timeouts, a connection cap below the descriptor limit.

aiohttp's server has no header-read timeout and no connection cap: clients trickling their headers (or bodies)
a byte at a time hold their connections for as long as they like, and enough of them exhaust the process's file
descriptors, after which ``accept()`` fails and every lane that opens a file or socket fails with ``EMFILE``.

- :class:`ConnectionGuard` is the protocol factory a :class:`GuardedSite` listens with. It wraps aiohttp's
  request handler per connection, counts connections, and refuses one above the cap with a short ``503``
  (``Connection: close``) instead of letting descriptors run out. The cap (:func:`connection_cap`) is the
  requested one, or by default the soft ``RLIMIT_NOFILE`` minus a quarter (at least 64) kept for lanes, stores,
  logs and outbound connections.
- **Per address**: one remote address holds at most ``max_connections_per_address`` of them (default half the
  cap, :func:`address_cap`), so one host's flood leaves the other half to everyone else.
- **Idle, unproven connections give way**: a connection with no request in progress that never carried a request
  the service identified (an API key it accepted, or open mode's guard; :data:`TRUSTED_REQUEST_KEY`) is
  *evictable*. At either cap a newcomer closes the oldest evictable connection (of the same address at the
  address cap) instead of being refused; only when there is none is it refused. Sockets that connect and idle,
  trickle a head, or only collect ``401`` answers therefore cannot keep a keyed client's new connection out, and a
  keyed client's kept-alive connections are never closed for them.
- **Header timeout**: a connection must deliver a complete request head within ``header_timeout_s`` of
  connecting, and of its first byte after each response (keep-alive); otherwise it is closed. The request
  middleware :func:`request_marks` tells the guard when a request's handler started and ended.
- **Body timeout**: :func:`read_body` reads a request body within ``body_timeout_s`` (the service answers 408).
- **Metrics** (on the engine's registry): ``fabric_http_connections_open``, ``fabric_http_connections_cap``,
  ``fabric_http_connections_refused_total``, ``fabric_http_connections_evicted_total``,
  ``fabric_http_connections_address_cap``, ``fabric_http_header_timeouts_total``, ``fabric_http_body_timeouts_total``.
"""

from __future__ import annotations

import asyncio
import resource
import signal
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge

from fabric.serve.protocol import ServiceRunner  # parser errors answered in the API's JSON shape

__all__ = [
    "CONNECTION_GUARD_KEY",
    "TRUSTED_REQUEST_KEY",
    "ConnectionGuard",
    "GuardedSite",
    "ServerLimits",
    "address_cap",
    "body_timeout",
    "connection_cap",
    "read_body",
    "request_marks",
    "serve_app",
]

_REFUSAL_BODY = b'{"error": {"field": null, "message": "too many connections, try again"}}'
_REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
    b"Retry-After: 1\r\nContent-Length: " + str(len(_REFUSAL_BODY)).encode() + b"\r\n\r\n" + _REFUSAL_BODY
)


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Limits of the HTTP server (``fabric serve`` flags)."""

    header_timeout_s: float = 10.0
    """A complete request head must arrive within this many seconds."""
    body_timeout_s: float = 30.0
    """A request body must arrive within this many seconds (408 otherwise)."""
    max_connections: int = 0
    """Open connections above which new ones are refused; 0: derived from ``RLIMIT_NOFILE``."""
    max_connections_per_address: int = 0
    """Open connections one remote address may hold; 0: half of the connection cap (:func:`address_cap`)."""


def connection_cap(requested: int = 0) -> int:
    """The connection cap: ``requested`` (or the soft descriptor limit), kept below the descriptor limit."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 65536
    ceiling = max(16, soft - max(64, soft // 4))
    return min(requested, ceiling) if requested > 0 else ceiling


def address_cap(cap: int, requested: int = 0) -> int:
    """Connections one remote address may hold: ``requested`` (at most ``cap``), by default half of ``cap``."""
    return min(requested, cap) if requested > 0 else max(1, cap // 2)


class _Metrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        r = registry or CollectorRegistry()
        self.open = Gauge("fabric_http_connections_open", "Open HTTP connections", registry=r)
        self.cap = Gauge("fabric_http_connections_cap", "HTTP connections accepted at most", registry=r)
        self.refused = Counter("fabric_http_connections_refused", "Connections refused at the cap", registry=r)
        self.evicted = Counter(
            "fabric_http_connections_evicted",
            "Idle connections never trusted with a request, closed to make room for a new one at a cap",
            registry=r,
        )
        self.address_cap = Gauge(
            "fabric_http_connections_address_cap", "HTTP connections one remote address may hold", registry=r
        )
        self.header_timeouts = Counter(
            "fabric_http_header_timeouts", "Connections closed: request head not received in time", registry=r
        )
        self.body_timeouts = Counter(
            "fabric_http_body_timeouts", "Requests answered 408: body not received in time", registry=r
        )


class _Tracked(asyncio.Protocol):
    """One connection: aiohttp's handler inside, a header deadline around it."""

    def __init__(self, inner: asyncio.Protocol, guard: ConnectionGuard) -> None:
        self.inner = inner
        self.guard = guard
        self.transport: asyncio.Transport | None = None
        self.in_request = False
        self.data_during_request = False
        self.timer: asyncio.TimerHandle | None = None
        self.address: str | None = None
        self.trusted = False
        """A request on it was identified by the service (it is never evicted)."""
        self.refused = False
        """Over its address's cap: answered 503 and closed; aiohttp never saw it."""

    def arm(self) -> None:
        if self.timer is None:
            loop = asyncio.get_running_loop()
            self.timer = loop.call_later(self.guard.limits.header_timeout_s, self._expired)

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _expired(self) -> None:
        self.timer = None
        if not self.in_request and self.transport is not None and not self.transport.is_closing():
            self.guard.metrics.header_timeouts.inc()
            self.transport.abort()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.address = str(peer[0]) if isinstance(peer, tuple) and peer else None
        if not self.guard.opened(self):
            self.refused = True
            transport.write(_REFUSAL)
            transport.close()
            return
        self.arm()
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return
        if self.in_request:
            self.data_during_request = True
        else:
            self.arm()
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return None if self.refused else self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.disarm()
        self.guard.closed(self)
        if not self.refused:
            self.inner.connection_lost(exc)


class _Refuse(asyncio.Protocol):
    """A connection over the cap: one 503, then closed."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(_REFUSAL)
        transport.close()


class ConnectionGuard:
    """Protocol factory around aiohttp's server: counts connections, caps them (in all and per remote address),
    closes idle unproven ones to make room, times request heads.

    Args:
        limits: timeouts and caps.
        registry: Prometheus registry for the metrics (the engine's).

    :attr:`server` (the runner's ``web.Server``) is set by :class:`GuardedSite` when it starts.
    """

    def __init__(self, limits: ServerLimits, registry: CollectorRegistry | None = None) -> None:
        self.server: Callable[[], asyncio.Protocol] | None = None
        self.limits = limits
        self.cap = connection_cap(limits.max_connections)
        self.address_cap = address_cap(self.cap, limits.max_connections_per_address)
        self.metrics = _Metrics(registry)
        self.metrics.cap.set(self.cap)
        self.metrics.address_cap.set(self.address_cap)
        self.live: set[_Tracked] = set()
        """Connections counted against the cap: from the accept (factory call) until the connection is lost."""
        self.connections: dict[asyncio.Transport, _Tracked] = {}
        self.per_address: dict[str, int] = {}
        """Made connections per remote address."""
        self.evictable: dict[_Tracked, None] = {}
        """Made connections with no request in progress that were never trusted, oldest first."""

    def __call__(self) -> asyncio.Protocol:
        # Counted here, not in connection_made: asyncio accepts a whole backlog of connections before any of
        # them is made, so a count taken later would let a burst past the cap.
        assert self.server is not None, "GuardedSite.start sets the server"
        if len(self.live) >= self.cap and not self._evict(None):
            self.metrics.refused.inc()
            return _Refuse()
        conn = _Tracked(self.server(), self)
        self.live.add(conn)
        self.metrics.open.set(len(self.live))
        return conn

    def _evict(self, address: str | None) -> bool:
        """Close the oldest evictable connection (of ``address`` when given); False when there is none."""
        victim = next((c for c in self.evictable if address is None or c.address == address), None)
        if victim is None:
            return False
        self.closed(victim)  # uncounted now: connection_lost comes a loop turn later
        assert victim.transport is not None
        victim.transport.abort()
        self.metrics.evicted.inc()
        return True

    def opened(self, conn: _Tracked) -> bool:
        """Register a made connection (for the request marks); False when its address is over its cap and none of
        that address's connections can give way (the caller refuses it)."""
        assert conn.transport is not None
        address = conn.address
        if address is not None:
            if self.per_address.get(address, 0) >= self.address_cap and not self._evict(address):
                self.metrics.refused.inc()
                self.closed(conn)
                return False
            self.per_address[address] = self.per_address.get(address, 0) + 1
        self.connections[conn.transport] = conn
        self.evictable[conn] = None
        return True

    def closed(self, conn: _Tracked) -> None:
        """Forget a lost (or evicted, or refused) connection; idempotent."""
        registered = conn.transport is not None and self.connections.pop(conn.transport, None) is not None
        if registered and conn.address is not None:
            left = self.per_address.get(conn.address, 0) - 1
            if left > 0:
                self.per_address[conn.address] = left
            else:
                self.per_address.pop(conn.address, None)
        self.evictable.pop(conn, None)
        self.live.discard(conn)
        self.metrics.open.set(len(self.live))

    def request_started(self, transport: Any) -> None:
        """A request head was parsed on ``transport``: its deadline is met."""
        conn = self.connections.get(transport)
        if conn is not None:
            conn.in_request, conn.data_during_request = True, False
            self.evictable.pop(conn, None)
            conn.disarm()

    def request_done(self, transport: Any, *, trusted: bool = False) -> None:
        """A response was sent on ``transport`` (``trusted``: the service identified its caller): the next head is
        timed from its first byte."""
        conn = self.connections.get(transport)
        if conn is not None:
            conn.in_request = False
            conn.trusted = conn.trusted or trusted
            if not conn.trusted:
                self.evictable[conn] = None
            if conn.data_during_request:  # a pipelined next request already began
                conn.arm()


CONNECTION_GUARD_KEY: web.AppKey[ConnectionGuard] = web.AppKey("connection_guard", ConnectionGuard)
"""Where the service finds the guard (set before the runner starts)."""
TRUSTED_REQUEST_KEY: web.AppKey[Callable[[web.Request], bool]] = web.AppKey("trusted_request")
"""Whether a finished request's caller was identified (an API key the service accepted, or open mode): its
connection is then never evicted. Without it no connection is trusted (every idle one may give way at a cap)."""


@web.middleware
async def request_marks(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Tell the app's :class:`ConnectionGuard` (if any) when each request starts and ends, and whether the app
    trusted its caller (:data:`TRUSTED_REQUEST_KEY`)."""
    guard = request.app.get(CONNECTION_GUARD_KEY)
    if guard is None:
        return await handler(request)
    guard.request_started(request.transport)
    try:
        return await handler(request)
    finally:
        trusted = request.app.get(TRUSTED_REQUEST_KEY)
        guard.request_done(request.transport, trusted=trusted is not None and trusted(request))


def body_timeout(request: web.Request) -> float:
    """Seconds ``request``'s body may take to arrive (the serving guard's ``body_timeout_s``, else the default)."""
    guard = request.app.get(CONNECTION_GUARD_KEY)
    return (guard.limits if guard is not None else ServerLimits()).body_timeout_s


async def read_body(request: web.Request, limit: int, timeout_s: float) -> bytes | None:
    """The request body (at most ``limit + 1`` bytes read), or None when it did not arrive within ``timeout_s``."""
    buf = bytearray()
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.content.iter_chunked(1 << 16):
                buf += chunk
                if len(buf) > limit:
                    break
    except TimeoutError:
        guard = request.app.get(CONNECTION_GUARD_KEY)
        if guard is not None:
            guard.metrics.body_timeouts.inc()
        return None
    return bytes(buf)


class GuardedSite(web.TCPSite):
    """A TCP site whose connections go through a :class:`ConnectionGuard`."""

    def __init__(
        self, runner: web.AppRunner, guard: ConnectionGuard, host: str, port: int, sock: socket.socket | None = None
    ) -> None:
        super().__init__(runner, host, port)
        self.guard = guard
        self.sock = sock
        """A listening socket to accept on instead of binding ``host:port`` (a ``--workers`` child's)."""

    async def start(self) -> None:
        """Listen with the guard (around the runner's server) as protocol factory."""
        await web.BaseSite.start(self)  # registers the site with its runner
        self.guard.server = self._runner.server
        loop = asyncio.get_running_loop()
        if self.sock is not None:
            self._server = await loop.create_server(self.guard, sock=self.sock, backlog=self._backlog)
        else:
            self._server = await loop.create_server(self.guard, self._host, self._port, backlog=self._backlog)
        self._bound_port = self._server.sockets[0].getsockname()[1] if self._server.sockets else self._port


async def serve_app(
    app: web.Application,
    *,
    host: str,
    port: int,
    limits: ServerLimits,
    registry: CollectorRegistry | None = None,
    started: Callable[[str], None] = print,
    stop: asyncio.Event | None = None,
    sock: socket.socket | None = None,
) -> None:
    """Serve ``app`` behind a :class:`ConnectionGuard` until SIGINT/SIGTERM (or ``stop``), then clean up; on
    ``sock`` (already listening) when given, else on ``host:port``."""
    guard = ConnectionGuard(limits, registry)
    app[CONNECTION_GUARD_KEY] = guard
    runner = ServiceRunner(app, access_log=None, keepalive_timeout=max(15.0, limits.header_timeout_s))
    await runner.setup()
    try:
        site = GuardedSite(runner, guard, host, port, sock)
        await site.start()
        started(site.name)
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
    finally:
        await runner.cleanup()
