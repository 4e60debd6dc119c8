"""Request bodies in a content coding, on every route that reads one, over loopback: the real service app
(aiohttp's test server, and ``fabric serve``'s own runner for codings its parser refuses)."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from fabric.query.engine import Engine
from fabric.serve import requests
from fabric.serve.limits.server import ServerLimits, serve_app
from fabric.serve.service import create_app
from fabric.settings import load_settings
from lanes.base import LaneResources
from lanes.fake import FakeLane

ROUTES = {
    "/v1/search": b'{"query": "rrf"}',
    "/v1/cite": b'{"answer": "Text keyword 1.", "items": [{"id": "a", "text": "Text keyword 1."}]}',
    "/v1/ingest": b'{"entries": [{"id": "a", "text": "hello"}]}',
    "/mcp": b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
}


def _engine(home: Path) -> Engine:
    settings = load_settings(env={"FABRIC_HOME": str(home)})
    return Engine(settings, lanes={"keyword": FakeLane(name="keyword", hits=3)}, resources=LaneResources(home=home))


@asynccontextmanager
async def _served(home: Path) -> AsyncIterator[str]:
    """The service app on loopback (aiohttp's test server); yields its base URL."""
    async with TestServer(create_app(_engine(home)), host="127.0.0.1") as server:
        yield str(server.make_url(""))


async def _post(base: str, path: str, body: bytes, coding: str | list[str]) -> tuple[int, Any]:
    """POST ``body`` as JSON with the given ``Content-Encoding`` header(s), on a connection of its own."""
    codings = [coding] if isinstance(coding, str) else coding
    headers = [("Content-Type", "application/json"), *(("Content-Encoding", c) for c in codings)]
    connector = aiohttp.TCPConnector(force_close=True)
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.post(base + path, data=body, headers=headers) as resp,
    ):
        return resp.status, await resp.json(content_type=None)


class TestContentEncoding:
    @pytest.mark.parametrize("path", sorted(ROUTES))
    @pytest.mark.parametrize("coding", ["gzip", "deflate", "GZIP"])
    async def test_a_body_not_in_its_coding_is_a_400(self, tmp_path: Path, path: str, coding: str) -> None:
        """``Content-Encoding: gzip`` (or deflate) on a plain JSON body is a 400 in the service's error shape
        naming the body, never a 500."""
        async with _served(tmp_path) as base:
            status, body = await _post(base, path, ROUTES[path], coding)
        assert status == 400
        name = coding.lower()
        assert body["error"] == {
            "field": "body",
            "message": f"the body is not valid {name} data (Content-Encoding: {name})",
        }

    @pytest.mark.parametrize("path", sorted(ROUTES))
    @pytest.mark.parametrize("coding", ["x-gzip", "gzip, gzip", "compress", ["gzip", "gzip"]])
    async def test_an_unsupported_coding_is_a_400(self, tmp_path: Path, path: str, coding: str | list[str]) -> None:
        """A coding the service does not decode (or several) is a 400 naming Content-Encoding: the body is never
        read as if it were plain."""
        async with _served(tmp_path) as base:
            status, body = await _post(base, path, ROUTES[path], coding)
        assert status == 400
        assert body["error"]["field"] == "Content-Encoding"
        assert body["error"]["message"].startswith("unsupported content coding")

    @pytest.mark.parametrize("path", ["/v1/search", "/v1/cite", "/v1/ingest"])
    async def test_gzip_and_deflate_bodies_are_read(self, tmp_path: Path, path: str) -> None:
        """A body really in gzip or deflate is decoded and answered as the plain one is."""
        async with _served(tmp_path) as base:
            plain = (await _post(base, path, ROUTES[path], "identity"))[0]
            zipped = (await _post(base, path, gzip.compress(ROUTES[path]), "gzip"))[0]
            deflated = (await _post(base, path, zlib.compress(ROUTES[path]), "deflate"))[0]
        assert plain in (200, 202)
        assert zipped == deflated == plain

    async def test_a_gzip_bomb_is_capped_by_its_decoded_size(self, tmp_path: Path) -> None:
        """The search route's 64 KiB cap counts decoded bytes: 10 MB of JSON gzipped to 10 KB is a 413."""
        bomb = gzip.compress(b'{"query": "' + b" " * 10_000_000 + b'"}')
        async with _served(tmp_path) as base:
            status, body = await _post(base, "/v1/search", bomb, "gzip")
        assert (status, body["error"]["field"]) == (413, "body")

    async def test_brotli_without_its_decoder_is_a_json_400(self, tmp_path: Path) -> None:
        """``br`` (which aiohttp's parser refuses before any route) is a 400 in the API's JSON shape under
        ``fabric serve``'s runner, and the service goes on."""
        stop = asyncio.Event()
        port: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        app = create_app(_engine(tmp_path))
        task = asyncio.create_task(
            serve_app(app, host="127.0.0.1", port=0, limits=ServerLimits(), stop=stop,
                      started=lambda name: port.set_result(int(name.rsplit(":", 1)[1])))
        )  # fmt: skip
        try:
            base = f"http://127.0.0.1:{await asyncio.wait_for(port, 30)}"
            status, body = await _post(base, "/v1/search", ROUTES["/v1/search"], "br")
            assert status == 400
            assert set(body["error"]) == {"field", "message"}
            assert (await _post(base, "/v1/search", ROUTES["/v1/search"], "identity"))[0] == 200
        finally:
            stop.set()
            await task


def test_public_api() -> None:
    """The module's exports."""
    assert set(requests.__all__) == {"BodyError", "error_body", "json_errors", "read_capped", "read_json", "spool_body"}
