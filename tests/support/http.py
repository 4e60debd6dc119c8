"""Helpers for HTTP adapter tests: loopback aiohttp servers behind real-looking host names."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from fabric.httpclient import AllowList, HostRule, StaticResolver, create_session

__all__ = ["guarded", "serve"]


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
