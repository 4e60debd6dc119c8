"""The service's own limits over real loopback sockets: head/body deadlines, connection cap, metrics."""

from __future__ import annotations

import asyncio
import resource
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import fabric.serve.limits.server as mod
from fabric.query.engine import Engine
from fabric.serve.limits.server import ServerLimits, connection_cap, serve_app
from fabric.serve.service import create_app
from fabric.settings import load_settings
from lanes.base import LaneResources
from lanes.fake import FakeLane


@dataclass
class Served:
    """A running service: its port and its metrics registry."""

    port: int
    engine: Engine

    def metric(self, name: str) -> float:
        value = self.engine.metrics.registry.get_sample_value(name)
        return 0.0 if value is None else value

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", self.port)

    async def trusted(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A kept-alive connection that carried a request the service identified (open mode: any guarded one)."""
        reader, writer = await self.connect()
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        async with asyncio.timeout(10):
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
            await reader.readexactly(length)
        assert head.startswith(b"HTTP/1.1 200"), head
        return reader, writer

    async def get(self, path: str) -> bytes:
        reader, writer = await self.connect()
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        async with asyncio.timeout(10):
            data = await reader.read()
        writer.close()
        return data


async def _serve(tmp_path: Path, limits: ServerLimits) -> AsyncIterator[Served]:
    settings = load_settings(env={"FABRIC_HOME": str(tmp_path)})
    engine = Engine(
        settings, lanes={"keyword": FakeLane(name="keyword", hits=3)}, resources=LaneResources(home=tmp_path)
    )
    stop = asyncio.Event()
    port: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def started(name: str) -> None:
        port.set_result(int(name.rsplit(":", 1)[1]))

    app = create_app(engine)
    registry = engine.metrics.registry
    task = asyncio.create_task(
        serve_app(app, host="127.0.0.1", port=0, limits=limits, registry=registry, started=started, stop=stop)
    )
    try:
        async with asyncio.timeout(30):
            yield Served(await port, engine)
    finally:
        stop.set()
        await task


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """The service with short deadlines and a cap of 3 connections."""
    limits = ServerLimits(header_timeout_s=0.3, body_timeout_s=0.3, max_connections=3, max_connections_per_address=3)
    async for s in _serve(tmp_path, limits):
        yield s


async def _closed_by_server(reader: asyncio.StreamReader) -> bytes:
    async with asyncio.timeout(10):
        return await reader.read()


class TestDeadlines:
    async def test_trickled_head_is_cut(self, served: Served) -> None:
        """A request head that never completes: the server closes the connection and counts it."""
        reader, writer = await served.connect()
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # no blank line: the head never ends
        assert await _closed_by_server(reader) == b""
        writer.close()
        assert served.metric("fabric_http_header_timeouts_total") == 1.0
        assert b"200 OK" in await served.get("/healthz")

    async def test_silent_connection_is_cut(self, served: Served) -> None:
        """A connection that sends nothing at all is closed too."""
        reader, writer = await served.connect()
        assert await _closed_by_server(reader) == b""
        writer.close()

    async def test_keep_alive_then_trickled_head_is_cut(self, served: Served) -> None:
        """After a full request on a keep-alive connection, the next head is timed from its first byte."""
        reader, writer = await served.connect()
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        async with asyncio.timeout(10):
            head = await reader.readuntil(b"\r\n\r\n")
        assert b"200 OK" in head
        writer.write(b"GET /healthz HTTP/1.1\r\n")
        rest = await _closed_by_server(reader)
        assert b"HTTP/1.1" not in rest.split(b"}", 1)[-1]  # nothing answered for the trickled second request
        writer.close()

    async def test_trickled_body_is_408(self, served: Served) -> None:
        """A body that stops arriving is answered 408 (and counted) instead of holding the connection."""
        reader, writer = await served.connect()
        writer.write(
            b"POST /v1/search HTTP/1.1\r\nHost: [::1]\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            b'{"query": '
        )
        async with asyncio.timeout(10):
            head = await reader.readuntil(b"\r\n\r\n")
        writer.close()
        assert head.startswith(b"HTTP/1.1 408")
        assert served.metric("fabric_http_body_timeouts_total") == 1.0


class TestConnectionCap:
    async def test_over_the_cap_is_503_then_recovers(self, tmp_path: Path) -> None:
        """With 3 trusted connections open (none may give way) the 4th gets a 503 and is closed; once one closes,
        new ones are served."""
        async for served in _serve(
            tmp_path, ServerLimits(header_timeout_s=30.0, max_connections=3, max_connections_per_address=3)
        ):
            held = [await served.trusted() for _ in range(3)]
            reader, writer = await served.connect()
            refused = await _closed_by_server(reader)
            writer.close()
            assert refused.startswith(b"HTTP/1.1 503")
            assert b"too many connections" in refused
            assert served.metric("fabric_http_connections_refused_total") == 1.0
            assert served.metric("fabric_http_connections_open") == 3.0
            _r, w = held.pop()
            w.close()
            await w.wait_closed()
            for _ in range(200):  # the server sees the close on its next loop turns
                if served.metric("fabric_http_connections_open") < 3.0:
                    break
                await asyncio.sleep(0.01)
            assert b"200 OK" in await served.get("/healthz")
            metrics = await served.get("/metrics")
            assert b"fabric_http_connections_cap 3.0" in metrics
            for _r, w in held:
                w.close()

    async def test_burst_cannot_pass_the_cap(self, tmp_path: Path) -> None:
        """40 connections opened at once (accepted in one batch): at most the cap are kept, the rest refused."""
        async for served in _serve(
            tmp_path, ServerLimits(header_timeout_s=30.0, max_connections=3, max_connections_per_address=3)
        ):
            conns = await asyncio.gather(*[served.connect() for _ in range(40)])
            for _ in range(200):
                if served.metric("fabric_http_connections_refused_total") + 3 >= 40:
                    break
                await asyncio.sleep(0.01)
            assert served.metric("fabric_http_connections_open") == 3.0
            assert served.metric("fabric_http_connections_refused_total") == 37.0
            for _r, w in conns:
                w.close()

    def test_cap_stays_below_the_descriptor_limit(self) -> None:
        """The derived cap leaves at least a quarter (and 64) of the descriptors to lanes and stores."""
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        cap = connection_cap()
        assert cap <= soft - max(64, soft // 4) or cap == 16
        assert connection_cap(10**9) == cap
        assert connection_cap(5) == 5


def test_public_api() -> None:
    """The module exports exactly its documented names."""
    assert set(mod.__all__) == {
        "CONNECTION_GUARD_KEY", "TRUSTED_REQUEST_KEY", "ConnectionGuard", "GuardedSite", "ServerLimits", "address_cap",
        "body_timeout", "connection_cap", "read_body", "request_marks", "serve_app",
    }  # fmt: skip
