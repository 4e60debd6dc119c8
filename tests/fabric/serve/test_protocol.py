"""The HTTP contract below the routes: a 405 names the allowed methods, requests aiohttp's parser refuses are
answered in the API's JSON error shape with its headers, and every URL the document allows reaches its route.

The real app (fake lanes) served by :class:`~fabric.serve.protocol.ServiceRunner` on loopback; raw requests are
written on a socket, since a client library would refuse to send them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import pytest
from aiohttp import ClientSession, web

from fabric.query.engine import Engine
from fabric.serve.protocol import MAX_LINE_BYTES, ServiceRunner
from fabric.serve.service import create_app
from fabric.settings import load_settings
from fusion.cursor import encode_cursor
from lanes.base import LaneResources
from lanes.fake import FakeLane


@pytest.fixture
async def base_url(tmp_path: Path) -> AsyncIterator[str]:
    """The service (open mode, a keyword lane of 5 hits) on a free loopback port."""
    settings = load_settings(env={"FABRIC_HOME": str(tmp_path)})
    engine = Engine(
        settings, lanes={"keyword": FakeLane(name="keyword", hits=5)}, resources=LaneResources(home=tmp_path)
    )
    runner = ServiceRunner(create_app(engine, mcp=False))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def _raw(base_url: str, head: bytes) -> tuple[int, dict[str, str], bytes]:
    """Write ``head`` on a fresh connection; the status, headers and body of the answer."""
    host, port = base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(head)
    await writer.drain()
    data = await reader.read()  # the service closes the connection after a parser error
    writer.close()
    head_part, _, body = data.partition(b"\r\n\r\n")
    lines = head_part.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


async def test_405_names_the_allowed_methods(base_url: str) -> None:
    """An undeclared method answers 405 with Allow (RFC 9110) and the API's JSON error."""
    async with ClientSession() as session, session.request("TRACE", f"{base_url}/v1/search") as resp:
        assert resp.status == 405
        assert resp.headers["Allow"] == "POST"
        assert (await resp.json())["error"]["message"] == "Method Not Allowed"
        assert resp.headers["X-Request-Id"]


async def test_an_over_long_request_line_is_a_json_error(base_url: str) -> None:
    """A request line past the parser's limit is answered in the API's shape, not aiohttp's text/plain."""
    path = "/v1/audit?entry_id=" + "a" * (MAX_LINE_BYTES + 10)
    status, headers, body = await _raw(base_url, f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert status == 400
    assert headers["content-type"].startswith("application/json")
    assert headers["x-request-id"]
    assert headers["connection"] == "close"
    error = json.loads(body)["error"]
    assert error["field"] is None
    assert f"longer than {MAX_LINE_BYTES} bytes" in error["message"]


async def test_a_malformed_header_is_a_json_error(base_url: str) -> None:
    """A header line without a colon: 400 in the API's JSON shape."""
    status, headers, body = await _raw(base_url, b"GET /healthz HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n")
    assert status == 400
    assert headers["content-type"].startswith("application/json")
    assert json.loads(body)["error"]["message"] == "malformed HTTP request"


async def test_every_documented_url_reaches_its_route(base_url: str) -> None:
    """The longest parameter the document allows (1 024 characters of 4 UTF-8 bytes, 12 KiB percent-encoded: past
    aiohttp's default 8 190-byte line) is answered by the route."""
    entry_id = quote("\U0001f600" * 1024, safe="")
    async with ClientSession() as session, session.get(f"{base_url}/v1/audit?entry_id={entry_id}") as resp:
        assert resp.status == 200, await resp.text()
        assert (await resp.json())["records"] == []


async def test_a_cursor_of_another_query_is_a_409(base_url: str) -> None:
    """A cursor of the documented form that this engine did not issue for this query: 409 naming the cursor."""
    cursor = encode_cursor(5, "another query", b"another secret")
    async with ClientSession() as session:
        async with session.post(f"{base_url}/v1/search", json={"query": "rrf", "top_k": 2}) as resp:
            issued = (await resp.json())["next_cursor"]
        async with session.post(f"{base_url}/v1/search", json={"query": "rrf", "top_k": 2, "cursor": issued}) as resp:
            assert resp.status == 200
        async with session.post(f"{base_url}/v1/search", json={"query": "rrf", "top_k": 2, "cursor": cursor}) as resp:
            assert resp.status == 409
            assert (await resp.json())["error"]["field"] == "cursor"
        async with session.post(f"{base_url}/v1/search", json={"query": "rrf", "cursor": "c1?"}) as resp:
            assert resp.status == 400  # not of the documented form: the schema refuses it too
