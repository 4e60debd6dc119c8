"""Seed 003's bibliography through the service's doors: ``POST /v1/search``, ``POST /v1/cite`` and the MCP ``cite``
tool (the SDK's streamable HTTP client) over one live app on loopback and the real embedded stores of a tmp home.

Every source document the answer used is listed, cited or not, with id, title, url, domain, published_at, author
and excerpt; the answers validate against the OpenAPI document's response schemas."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import jsonschema  # type: ignore[import-untyped]
import pytest
from aiohttp.test_utils import TestServer
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from fabric.query.engine import Engine
from fabric.serve.service import create_app
from fabric.settings import load_settings
from lanes.base import LaneResources
from tests.support.embedded import BagEmbedder

ENTRIES = [
    {"id": "kb-1", "title": "Rollback", "text": "Rollback within five minutes when errors rise.",
     "url": "https://runbooks.example.org/rollback", "author": "Alice Smith", "published_at": "2026-10-01"},
    {"id": "kb-2", "title": "Canary", "text": "Canary deploys send five percent of traffic first.",
     "author": "Bob Jones"},
    {"id": "kb-3", "title": "Releases", "text": "Releases roll out in five waves after the canary."},
]  # fmt: skip
ANSWER = "Rollback within five minutes when errors rise."
KEYS = {"marker", "cited", "id", "item_ids", "title", "url", "domain", "published_at", "author", "excerpt"}


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[TestServer]:
    """A live service (open mode, loopback) over a tmp home holding :data:`ENTRIES`."""
    home = tmp_path / "home"
    settings = load_settings(env={"FABRIC_HOME": str(home)})
    engine = Engine(settings, resources=LaneResources(home=home, embedder=BagEmbedder()))
    srv = TestServer(create_app(engine), host="127.0.0.1")
    async with srv:
        async with aiohttp.ClientSession() as http:
            resp = await http.post(srv.make_url("/v1/ingest"), json={"entries": ENTRIES})
            assert resp.status == 200, await resp.text()
        yield srv


async def _post(server: TestServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http:
        resp = await http.post(server.make_url(path), json=body)
        data: dict[str, Any] = await resp.json()
        assert resp.status == 200, data
    return data


async def _check_schema(server: TestServer, name: str, body: dict[str, Any]) -> None:
    """``body`` validates against the component schema ``name`` of the served OpenAPI document."""
    async with aiohttp.ClientSession() as http:
        doc = await (await http.get(server.make_url("/openapi.json"))).json()
    jsonschema.validate(body, {**doc["components"]["schemas"][name], "components": doc["components"]})


async def test_search_lists_every_source_with_its_citation(server: TestServer) -> None:
    """POST /v1/search: one entry per document returned; with citations_required the cited ones carry their marker
    and passage, the author comes from the ingested entry."""
    body = {"query": "rollback canary five", "constraints": {"citations_required": True}}
    result = await _post(server, "/v1/search", body)
    items = result["items"]
    assert {it["id"] for it in items} == {"kb-1", "kb-2", "kb-3"}
    sources = result["bibliography"]
    assert all(set(s) == KEYS for s in sources)
    assert sorted(s["id"] for s in sources) == ["kb-1", "kb-2", "kb-3"]
    marked = {it["id"]: it["citation"]["marker"] for it in items if it["citation"] is not None}
    assert {s["id"]: s["marker"] for s in sources if s["cited"]} == marked
    kb1 = next(s for s in sources if s["id"] == "kb-1")
    assert (kb1["author"], kb1["url"], kb1["domain"]) == ("Alice Smith", ENTRIES[0]["url"], "runbooks.example.org")
    assert kb1["published_at"] == "2026-10-01T00:00:00Z"
    assert next(s for s in sources if s["id"] == "kb-3")["author"] == ""
    await _check_schema(server, "SearchResult", result)


async def test_search_without_citations_lists_sources_uncited(server: TestServer) -> None:
    """Without citations_required nothing is cited, but every source is still listed."""
    result = await _post(server, "/v1/search", {"query": "rollback canary five"})
    assert [s["cited"] for s in result["bibliography"]] == [False] * len(result["items"])
    assert [s["id"] for s in result["bibliography"]] == [it["doc_id"] for it in result["items"]]


async def test_cite_lists_uncited_sources_over_http_and_mcp(server: TestServer) -> None:
    """POST /v1/cite and the MCP cite tool answer the same bibliography: the cited source [1] and the sources the
    answer did not cite, unmarked, each with its author and excerpt."""
    http = await _post(server, "/v1/cite", {"answer": ANSWER, "query": "rollback canary five", "top_k": 5})
    await _check_schema(server, "Citations", http)
    sources = http["bibliography"]
    assert (sources[0]["id"], sources[0]["marker"], sources[0]["author"]) == ("kb-1", 1, "Alice Smith")
    assert sources[0]["excerpt"] == ENTRIES[0]["text"]
    assert sorted((s["id"], s["cited"]) for s in sources[1:]) == [("kb-2", False), ("kb-3", False)]
    assert all(s["marker"] is None for s in sources[1:])
    async with (
        streamable_http_client(str(server.make_url("/mcp"))) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tool = await session.call_tool("cite", {"answer": ANSWER, "topic": "rollback canary five", "limit": 5})
    assert not tool.is_error
    assert tool.structured_content is not None
    assert tool.structured_content["bibliography"] == sources


async def test_cite_items_keep_their_document(server: TestServer) -> None:
    """Items posted back to /v1/cite (as search returned them) keep doc_id and author: two chunks of one document
    are one source."""
    items = [
        {"id": "d#1", "doc_id": "d", "title": "Doc", "text": ANSWER, "author": "Ann"},
        {"id": "d#2", "doc_id": "d", "title": "Doc", "text": "Canary deploys send five percent of traffic first."},
        {"id": "e", "title": "Other", "text": "Bread needs flour."},
    ]
    body = await _post(server, "/v1/cite", {"answer": ANSWER, "items": items})
    got = [(s["id"], s["marker"], s["item_ids"], s["author"]) for s in body["bibliography"]]
    assert got == [("d", 1, ["d#1", "d#2"], "Ann"), ("e", None, ["e"], "")]
