"""Helpers for HTTP adapter tests: loopback aiohttp servers behind real-looking host names."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from fabric.net.httpclient import AllowList, HostRule, StaticResolver, create_session

__all__ = ["Recorded", "guarded", "recording", "redirector", "serve"]


@asynccontextmanager
async def serve(app: web.Application) -> AsyncIterator[TestServer]:
    """Run ``app`` on 127.0.0.1 with an ephemeral port."""
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield server
    finally:
        await server.close()


@asynccontextmanager
async def guarded(
    allowed: Iterable[str], names: Iterable[str] = (), private_ok: bool = True
) -> AsyncIterator[aiohttp.ClientSession]:
    """A guarded session allowing ``allowed`` hosts; every name in ``allowed`` + ``names`` resolves to loopback."""
    allowed = list(allowed)
    table = dict.fromkeys([*allowed, *names], "127.0.0.1")
    session = create_session(AllowList.of(HostRule(h, private_ok) for h in allowed), resolver=StaticResolver(table))
    try:
        yield session
    finally:
        await session.close()


@dataclass(frozen=True, slots=True)
class Recorded:
    """One request a recording server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass(slots=True)
class _Log:
    requests: list[Recorded] = field(default_factory=list)


@asynccontextmanager
async def recording() -> AsyncIterator[tuple[TestServer, list[Recorded]]]:
    """A loopback server that answers ``{"reached": true}`` to anything and records every request it receives."""
    log = _Log()

    async def any_request(req: web.Request) -> web.Response:
        log.requests.append(Recorded(req.method, req.path, dict(req.headers), await req.read()))
        return web.json_response({"reached": True, "data": [], "choices": [{"message": {"content": "x"}}]})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", any_request)
    async with serve(app) as server:
        yield server, log.requests


def redirector(location: str) -> web.Application:
    """An app whose ``/r/{status}`` answers that redirect status to ``location`` (any method)."""

    async def redirect(req: web.Request) -> web.Response:
        await req.read()
        return web.Response(status=int(req.match_info["status"]), headers={"Location": location})

    app = web.Application()
    app.router.add_route("*", "/r/{status}", redirect)
    app.router.add_route("*", "/r/{status}/{tail:.*}", redirect)
    return app
