"""MCP over streamable HTTP: the SDK's own client against a live ``fabric serve`` app on loopback.

The app runs over the real embedded stores in a tmp home (bag-of-words embedder, no model download); the
client is ``mcp.ClientSession`` over ``mcp.client.streamable_http.streamable_http_client``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx2
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from fabric.query.engine import Engine
from fabric.serve.keys.store import KeyStore, Role
from fabric.serve.service import create_app
from fabric.settings import load_settings
from lanes.base import LaneResources
from tests.support.embedded import BagEmbedder

ENTRIES = [
    {"id": "e-42", "title": "deployment", "text": "Use blue-green deploys for zero-downtime releases."},
    {"id": "e-103", "title": "release rollback", "text": "Rollback within 5 min if error rate exceeds 1%."},
    {"id": "e-7", "title": "bread", "text": "Bread needs flour, water, salt and time."},
]


def _app(home: Path, **kw: Any) -> web.Application:
    settings = load_settings(env={"FABRIC_HOME": str(home)})
    engine = Engine(settings, resources=LaneResources(home=home, embedder=BagEmbedder()))
    return create_app(engine, **kw)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[TestServer]:
    """A live service on 127.0.0.1 over a tmp home."""
    async with TestServer(_app(tmp_path / "home"), host="127.0.0.1") as srv:
        yield srv


async def _session_calls(url: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    out = []
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for name, args in calls:
            out.append(await session.call_tool(name, args))
    return out


async def test_query_over_http_returns_seed_001_content(server: TestServer) -> None:
    """ingest then query through /mcp: seed 001's text and resource items."""
    url = str(server.make_url("/mcp"))
    ingested, result = await _session_calls(
        url, [("ingest", {"entries": ENTRIES}), ("query", {"topic": "deployment strategy", "limit": 2})]
    )
    assert not ingested.is_error
    assert json.loads(ingested.content[0].text)["status"] == "succeeded"
    assert not result.is_error
    text, resource = result.content
    assert text.text.startswith("Found ")
    assert text.text.endswith("entries; showing top 2 by hybrid score.")
    assert resource.resource.uri == "knowledge://entries?topic=deployment+strategy&limit=2"
    assert resource.resource.mime_type == "application/json"
    payload = json.loads(resource.resource.text)
    assert set(payload) == {"items", "next_cursor", "retrieval_ms"}
    assert payload["items"][0]["id"] == "e-42"
    fields = {"id", "topic", "content", "score_total", "score_lexical", "score_semantic", "score_graph", "graph_hops"}
    assert set(payload["items"][0]) == fields


async def test_bad_input_is_a_tool_error_with_the_api_message(server: TestServer) -> None:
    """The same error body as POST /v1/search, and the server keeps answering."""
    url = str(server.make_url("/mcp"))
    bad, good = await _session_calls(url, [("query", {"topic": "x", "lanes": ["nope"]}), ("status", {})])
    assert bad.is_error
    async with aiohttp.ClientSession() as http:
        resp = await http.post(server.make_url("/v1/search"), json={"query": "x", "lanes": ["nope"]})
        api = await resp.json()
    assert json.loads(bad.content[0].text) == api
    assert not good.is_error
    assert json.loads(good.content[0].text)["open"] is True


async def test_guard_covers_mcp(tmp_path: Path) -> None:
    """Once a key exists, /mcp answers 401 without it, like /v1/*, and serves the SDK's client with it."""
    home = tmp_path / "home"
    home.mkdir()
    _record, token = KeyStore(home).create("team-a", Role.READER)
    async with TestServer(_app(home), host="127.0.0.1") as srv:
        url = str(srv.make_url("/mcp"))
        async with httpx2.AsyncClient() as http:
            resp = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            assert resp.status_code == 401
            assert resp.json()["error"]["field"] == "authorization"
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = await session.list_tools()
        assert {t.name for t in tools.tools} == {"query", "ingest", "task", "cite", "status"}


async def test_mcp_ingest_keeps_the_keys_role(tmp_path: Path) -> None:
    """``/mcp`` is one read-only route for the guard, so the ingest tool checks the caller's role itself: a reader
    key cannot ingest, a writer key cannot claim operator trust, an admin key can."""
    home = tmp_path / "home"
    home.mkdir()
    store = KeyStore(home)
    tokens = {role: store.create("team-a", role)[1] for role in (Role.READER, Role.WRITER, Role.ADMIN)}
    plain = {"id": "n1", "title": "Note", "text": "Aurora borealis over the fjord."}
    trusted = {**plain, "id": "n2", "trust": "trusted"}

    async def ingest(role: Role, entry: dict[str, Any]) -> Any:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {tokens[role]}"}) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await session.call_tool("ingest", {"entries": [entry]})

    async with TestServer(_app(home), host="127.0.0.1") as srv:
        url = str(srv.make_url("/mcp"))
        as_reader = await ingest(Role.READER, plain)
        writer_trusted = await ingest(Role.WRITER, trusted)
        writer_plain = await ingest(Role.WRITER, plain)
        admin_trusted = await ingest(Role.ADMIN, trusted)
    assert as_reader.is_error
    assert json.loads(as_reader.content[0].text)["error"]["field"] == "authorization"
    assert writer_trusted.is_error
    assert json.loads(writer_trusted.content[0].text)["error"]["field"] == "entries[0].trust"
    assert not writer_plain.is_error, writer_plain
    assert not admin_trusted.is_error, admin_trusted
    assert json.loads(admin_trusted.content[0].text)["status"] == "succeeded"


async def test_mcp_ingest_keeps_what_a_writer_may_replace(tmp_path: Path) -> None:
    """The ingest tool holds the provenance rule of ``POST /v1/ingest``: a writer key's entry replacing an admin's is
    a tool error naming the rule (the admin's trusted text still answers); a writer replaces writers' entries, and
    an admin replaces a writer's."""
    home = tmp_path / "home"
    home.mkdir()
    store = KeyStore(home)
    tokens = {role: store.create("team-a", role)[1] for role in (Role.WRITER, Role.ADMIN)}
    original = {"id": "n1", "title": "Note", "text": "Aurora borealis over the fjord.", "trust": "trusted"}
    hijack = {"id": "n1", "title": "Note", "text": "There is no aurora over the fjord."}
    mine = {"id": "w1", "title": "Draft", "text": "Fjord ferries run hourly."}

    async def call(role: Role, tool: str, args: dict[str, Any]) -> Any:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {tokens[role]}"}) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await session.call_tool(tool, args)

    async with TestServer(_app(home), host="127.0.0.1") as srv:
        url = str(srv.make_url("/mcp"))
        assert not (await call(Role.ADMIN, "ingest", {"entries": [original]})).is_error
        refused = await call(Role.WRITER, "ingest", {"entries": [hijack]})
        page = await call(Role.WRITER, "query", {"topic": "aurora fjord"})
        own = [await call(Role.WRITER, "ingest", {"entries": [{**mine, "text": t}]}) for t in ("v1", "v2")]
        taken_over = await call(Role.ADMIN, "ingest", {"entries": [{**mine, "text": "v3"}]})
        after = await call(Role.WRITER, "ingest", {"entries": [{**mine, "text": "v4"}]})
    assert refused.is_error
    error = json.loads(refused.content[0].text)["error"]
    assert error["field"] == "entries[0].id"
    assert "writer key may not replace" in error["message"]
    items = json.loads(page.content[1].resource.text)["items"]
    assert [(it["id"], it["content"]) for it in items if it["id"] == "n1"] == [("n1", original["text"])]
    assert [r.is_error for r in own] == [False, False]
    assert not taken_over.is_error, taken_over
    assert after.is_error  # the admin's now
