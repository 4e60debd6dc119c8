"""Connection budgets over real loopback sockets: per remote address (127.0.0.1 against 127.0.0.2), and idle
connections that were never trusted giving way to new ones, so a flood of sockets cannot keep other clients out."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from fabric.serve.limits.server import ServerLimits, address_cap
from tests.fabric.serve.limits.test_server import Served, _serve

_STALLED_SEARCH = (
    b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    b'{"query": '
)


async def _from(served: Served, source: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the service from the loopback address ``source``."""
    return await asyncio.open_connection("127.0.0.1", served.port, local_addr=(source, 0))


async def _get_from(served: Served, source: str, path: str = "/healthz") -> bytes:
    reader, writer = await _from(served, source)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    async with asyncio.timeout(10):
        data = await reader.read()
    writer.close()
    return data


async def _until(predicate: Callable[[], bool], what: str) -> None:
    """Let the server's loop turn until ``predicate()`` holds (it runs in this loop: no wall-clock assertion)."""
    for _ in range(1000):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


def _inflight_is(registry: CollectorRegistry, n: int) -> Callable[[], bool]:
    return lambda: registry.get_sample_value("fabric_tenant_inflight", {"tenant": "default"}) == n


def _total(served: Served, n: int, *kinds: str) -> Callable[[], bool]:
    """Whether the connections counted as ``kinds`` (``open``: a gauge; ``refused``, ``evicted``: counters) sum
    to ``n``."""
    names = [f"fabric_http_connections_{k}" + ("" if k == "open" else "_total") for k in kinds]
    return lambda: sum(served.metric(name) for name in names) == n


def _close(conns: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]) -> None:
    for _r, w in conns:
        w.close()


def test_address_cap_defaults_to_half_the_cap() -> None:
    """One address may hold half of the connection cap unless told otherwise (never more than the cap)."""
    assert address_cap(768) == 384
    assert address_cap(1) == 1
    assert address_cap(768, 10) == 10
    assert address_cap(8, 100) == 8


class TestPerAddress:
    async def test_busy_address_cannot_take_the_other_addresses_slots(self, tmp_path: Path) -> None:
        """127.0.0.2 opens 8 connections that each hold a request (a stalled body: none may give way) against a
        cap of 8: it keeps 4 (its share), the rest are refused, and a request from 127.0.0.1 is still served."""
        limits = ServerLimits(header_timeout_s=30.0, body_timeout_s=30.0, max_connections=8)
        async for served in _serve(tmp_path, limits):
            registry = served.engine.metrics.registry
            flood = []
            for i in range(8):
                reader, writer = await _from(served, "127.0.0.2")
                writer.write(_STALLED_SEARCH)
                flood.append((reader, writer))
                if i < 4:  # in its request (past the guard) before the next one connects
                    await _until(_inflight_is(registry, i + 1), "in its request")
            await _until(_total(served, 4, "refused"), "4 refusals")
            refused = 0
            for reader, _w in flood[4:]:
                async with asyncio.timeout(10):
                    refused += (await reader.read()).startswith(b"HTTP/1.1 503")
            assert refused == 4
            assert b"200 OK" in await _get_from(served, "127.0.0.1")
            assert served.metric("fabric_http_connections_address_cap") == 4.0
            _close(flood)

    @pytest.mark.fault
    async def test_idle_flood_from_one_address_leaves_others_served(self, tmp_path: Path) -> None:
        """20 silent sockets from 127.0.0.2 (never a request) against a cap of 8: that address never holds more than
        4, and 127.0.0.1's requests are answered 200, not 503."""
        limits = ServerLimits(header_timeout_s=30.0, max_connections=8)
        async for served in _serve(tmp_path, limits):
            flood = [await _from(served, "127.0.0.2") for _ in range(20)]
            await _until(_total(served, 16, "evicted", "refused"), "16 connections of 127.0.0.2 closed")
            for _ in range(3):
                assert b"200 OK" in await _get_from(served, "127.0.0.1")
            assert served.metric("fabric_http_connections_open") <= 5.0
            _close(flood)


class TestIdleConnectionsGiveWay:
    async def test_new_connection_displaces_an_idle_unproven_one(self, tmp_path: Path) -> None:
        """At the cap, held by sockets that never sent a request, a new client is served: the oldest idle socket is
        closed for it (before: 503 "too many connections")."""
        limits = ServerLimits(header_timeout_s=30.0, max_connections=3, max_connections_per_address=3)
        async for served in _serve(tmp_path, limits):
            idle = [await served.connect() for _ in range(3)]
            await _until(_total(served, 3, "open"), "3 connections open")
            answer = await served.get("/healthz")
            assert answer.startswith(b"HTTP/1.1 200"), answer
            assert served.metric("fabric_http_connections_evicted_total") >= 1.0
            async with asyncio.timeout(10):
                assert await idle[0][0].read() == b""  # the oldest idle socket was the one closed
            _close(idle)

    async def test_trusted_connection_is_never_displaced(self, tmp_path: Path) -> None:
        """A kept-alive connection that carried an identified request survives a flood of new sockets at the cap,
        and its next request is answered; so do the connections that carried only refused requests not."""
        limits = ServerLimits(header_timeout_s=30.0, max_connections=2, max_connections_per_address=2)
        async for served in _serve(tmp_path, limits):
            reader, writer = await served.trusted()
            flood = [await served.connect() for _ in range(10)]
            await _until(_total(served, 9, "evicted", "refused"), "9 of the flood closed")
            writer.write(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            async with asyncio.timeout(10):
                head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), head
            writer.close()
            _close(flood)

    async def test_refused_requests_do_not_make_a_connection_trusted(self, tmp_path: Path) -> None:
        """A connection whose only request the guard refused (a foreign ``Host`` in open mode: 421) stays
        displaceable: a new client at the cap is served and that connection is the one closed."""
        limits = ServerLimits(header_timeout_s=30.0, max_connections=1, max_connections_per_address=1)
        async for served in _serve(tmp_path, limits):
            reader, writer = await served.connect()
            writer.write(b"GET /metrics HTTP/1.1\r\nHost: evil.example\r\n\r\n")
            async with asyncio.timeout(10):
                head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 421"), head
            answer = await served.get("/healthz")
            assert answer.startswith(b"HTTP/1.1 200"), answer
            async with asyncio.timeout(10):
                rest = await reader.read()
            assert b"HTTP/1.1" not in rest  # closed, nothing more answered on it
            writer.close()
