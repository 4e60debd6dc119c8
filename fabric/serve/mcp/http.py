"""The MCP streamable HTTP transport mounted in the aiohttp service (``fabric serve``) at ``/mcp``.

The SDK serves streamable HTTP as an ASGI application (its session manager's ``handle_request``); aiohttp is not
an ASGI server, so :func:`asgi_handler` adapts one aiohttp request to one ASGI ``http`` call: headers and body in,
status, headers and body chunks out, streamed as the SDK sends them (JSON or SSE). The manager runs stateless
(every POST is self-contained, so any replica can answer it) with JSON responses.

The route is an ordinary aiohttp route: the service's middlewares (its error handler and its request guard,
:mod:`fabric.serve.auth`: API keys, roles, per-tenant limits) run before the SDK sees the request. The guard also
checks ``Host`` and ``Origin`` against DNS rebinding wherever no key is needed (:mod:`fabric.serve.hosts`), for
``/mcp`` as for ``/v1/*``; the SDK's own check of them is turned off, so one implementation decides.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from aiohttp import web
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from fabric.serve.requests import BodyError, read_capped

__all__ = ["MAX_BODY_BYTES", "MCP_PATH", "asgi_handler", "mount_mcp"]

MCP_PATH = "/mcp"
"""Where ``fabric serve`` mounts the transport."""
MAX_BODY_BYTES = 32 * 1024 * 1024
"""Default body cap of the route (the service passes the larger of its search and ingest caps)."""

_Scope = MutableMapping[str, Any]
_Message = MutableMapping[str, Any]
_ASGIApp = Callable[[_Scope, Callable[[], Awaitable[_Message]], Callable[[_Message], Awaitable[None]]], Awaitable[None]]


def _scope(request: web.Request) -> _Scope:
    peer = request.transport.get_extra_info("peername") if request.transport else None
    sock = request.transport.get_extra_info("sockname") if request.transport else None
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": f"{request.version.major}.{request.version.minor}",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.raw_path.split("?", 1)[0].encode("latin-1"),
        "query_string": request.query_string.encode("latin-1"),
        "root_path": "",
        "headers": [(k.lower(), v) for k, v in request.raw_headers],
        "client": tuple(peer[:2]) if peer else None,
        "server": tuple(sock[:2]) if sock else None,
        "state": {},
    }


def asgi_handler(
    app: _ASGIApp, max_body_bytes: int = MAX_BODY_BYTES
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """An aiohttp handler that runs ``app`` (an ASGI 3 callable) for each request.

    The body is read before ``app`` runs, like every route's: at most ``max_body_bytes`` (else ``413``) within the
    server's body timeout (else ``408``, :func:`fabric.serve.requests.read_capped`), so a client that stalls its
    body holds neither the SDK nor a task for longer.
    """

    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            body = await read_capped(request, max_body_bytes)
        except BodyError as exc:
            return exc.response
        finished = asyncio.Event()
        response: web.StreamResponse | None = None
        body_done = False

        async def receive() -> _Message:
            nonlocal body_done
            if not body_done:
                body_done = True
                return {"type": "http.request", "body": body, "more_body": False}
            await finished.wait()  # the body is read: the next event is the end of the exchange
            return {"type": "http.disconnect"}

        async def send(message: _Message) -> None:
            nonlocal response
            if message["type"] == "http.response.start":
                response = web.StreamResponse(status=int(message["status"]))
                for name, value in message.get("headers", ()):
                    key = name.decode("latin-1")
                    if key.lower() != "content-length":  # aiohttp frames the body itself
                        response.headers.add(key, value.decode("latin-1"))
                await response.prepare(request)
            elif message["type"] == "http.response.body" and response is not None:
                body = message.get("body", b"")
                if body:
                    await response.write(body)
                if not message.get("more_body", False):
                    await response.write_eof()
                    finished.set()

        try:
            await app(_scope(request), receive, send)
        finally:
            finished.set()
        if response is None:
            raise web.HTTPInternalServerError(reason="the MCP transport sent no response")
        return response

    return handle


class _ManagerTask:
    """Runs the session manager's lifespan in one task of its own (its task group must open and close there)."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self.manager = manager
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _run(self, ready: asyncio.Future[None]) -> None:
        async with self.manager.run():
            ready.set_result(None)
            await self._stop.wait()

    async def start(self, _app: web.Application) -> None:
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._run(ready))
        await asyncio.wait({ready, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if self._task.done():
            self._task.result()  # the manager failed to start: raise its error

    async def stop(self, _app: web.Application) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def mount_mcp(
    app: web.Application,
    server: MCPServer,
    *,
    host: str = "127.0.0.1",
    path: str = MCP_PATH,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> None:
    """Serve ``server`` at ``path`` of ``app``; the transport starts with the app and stops first at clean-up.

    ``app``'s guard checks ``Host`` and ``Origin`` (:mod:`fabric.serve.hosts`); the SDK's check, on by default for
    a loopback ``host``, is off.
    """
    server.streamable_http_app(
        streamable_http_path=path, stateless_http=True, json_response=True, host=host,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )  # fmt: skip
    manager = server.session_manager
    task = _ManagerTask(manager)
    app.on_startup.append(task.start)
    app.on_cleanup.insert(0, task.stop)
    app.router.add_route("*", path, asgi_handler(manager.handle_request, max_body_bytes))
