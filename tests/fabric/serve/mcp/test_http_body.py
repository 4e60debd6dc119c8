"""``/mcp`` reads its request body like every route: within the body timeout (else 408) and under a cap (else 413),
over real loopback sockets against the served app."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from fabric.serve.limits.server import ServerLimits
from tests.fabric.serve.limits.test_server import _serve

_HEAD = (
    "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    "Accept: application/json, text/event-stream\r\nContent-Length: {length}\r\n\r\n"
)


async def test_stalled_mcp_body_is_408(tmp_path: Path) -> None:
    """Headers, then part of the body, then nothing: the server answers 408 in the API's error shape (before: the
    SDK waited for the rest for as long as the client kept the socket open)."""
    async for served in _serve(tmp_path, ServerLimits(header_timeout_s=30.0, body_timeout_s=0.3)):
        reader, writer = await served.connect()
        writer.write(_HEAD.format(length=500).encode() + b'{"jsonrpc": "2.0", ')
        async with asyncio.timeout(30):  # a guard against a hang; the assertion is on the answer
            answer = await reader.read()
        writer.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408"), answer
        assert json.loads(body)["error"]["field"] == "body"
        assert served.metric("fabric_http_body_timeouts_total") == 1.0


async def test_oversized_mcp_body_is_413_before_reading(tmp_path: Path) -> None:
    """A ``Content-Length`` over the route's cap (the larger of the search and ingest caps) is refused at once."""
    async for served in _serve(tmp_path, ServerLimits(header_timeout_s=30.0, body_timeout_s=30.0)):
        reader, writer = await served.connect()
        writer.write(_HEAD.format(length=64 * 1024 * 1024).encode())
        async with asyncio.timeout(30):
            head = await reader.readuntil(b"\r\n\r\n")
        writer.close()
        assert head.startswith(b"HTTP/1.1 413"), head


async def test_whole_mcp_body_still_reaches_the_sdk(tmp_path: Path) -> None:
    """A complete body sent in two pieces is answered by the SDK (here: its JSON-RPC answer to ``initialize``)."""
    message = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }  # fmt: skip
    raw = json.dumps(message).encode()
    async for served in _serve(tmp_path, ServerLimits(header_timeout_s=30.0, body_timeout_s=30.0)):
        reader, writer = await served.connect()
        writer.write(_HEAD.format(length=len(raw)).encode() + raw[:10])
        await writer.drain()
        await asyncio.sleep(0)
        writer.write(raw[10:])
        async with asyncio.timeout(30):
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), head
            chunk = await reader.readuntil(b"}}")
        writer.close()
        assert b'"id":1' in chunk.replace(b" ", b"")
