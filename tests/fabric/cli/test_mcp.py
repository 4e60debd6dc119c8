"""``fabric mcp``: the SDK's own client (``ClientSession`` + ``stdio_client``) driving a real subprocess.

The server runs on the default embedded configuration (SQLite FTS5, local Qdrant with MiniLM, SQLite graph) over
a tmp home; the entries are added through the ``ingest`` tool, then every tool and the entry resource are used.
One subprocess serves the whole scenario (the embedding model loads once).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parents[3]

ENTRIES = [
    {"id": "e-42", "title": "deployment", "text": "Use blue-green deploys for zero-downtime releases."},
    {"id": "e-103", "title": "release rollback", "text": "Rollback within 5 min if the error rate exceeds 1%."},
    {"id": "e-7", "title": "bread", "text": "Bread needs flour, water, salt and a long, slow rise."},
    {"id": "e-8", "title": "canary releases", "text": "Canary deploys send 5% of traffic to the new version first."},
]


def _params(home: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith(("FABRIC_", "HF_", "TRANSFORMERS_"))}
    env.pop("FABRIC_HOME", None)
    return StdioServerParameters(
        command=sys.executable, args=["-m", "fabric.cli", "--home", str(home), "mcp"], cwd=str(ROOT), env=env
    )


def _json(result: Any) -> Any:
    return json.loads(result.content[0].text)


async def _query_contract(session: ClientSession) -> None:
    result = await session.call_tool("query", {"topic": "deployment strategy", "limit": 2})
    assert not result.is_error, result
    text, resource = result.content
    assert text.type == "text"
    assert text.text == "Found 4 entries; showing top 2 by hybrid score."
    assert resource.type == "resource"
    assert resource.resource.uri == "knowledge://entries?topic=deployment+strategy&limit=2"
    assert resource.resource.mime_type == "application/json"
    page = json.loads(resource.resource.text)
    assert page["items"][0]["id"] == "e-42"
    assert isinstance(page["retrieval_ms"], int)
    for item in page["items"]:
        lanes = item["score_lexical"] + item["score_semantic"] + item["score_graph"]
        assert 0.0 < lanes <= item["score_total"] + 1e-6
    nxt = await session.call_tool("query", {"topic": "deployment strategy", "limit": 2, "cursor": page["next_cursor"]})
    page2 = json.loads(nxt.content[1].resource.text)
    assert not {i["id"] for i in page["items"]} & {i["id"] for i in page2["items"]}
    assert page2["next_cursor"] is None
    other = await session.call_tool(
        "query", {"topic": "deployment strategy", "limit": 2, "cursor": page["next_cursor"], "weights": {"graph": 3}}
    )
    assert _json(other) == {"error": {"field": "cursor", "message": _json(other)["error"]["message"]}}
    assert other.is_error


async def _errors(session: ClientSession) -> None:
    cases = [
        ({"topic": "x", "limit": 0}, "limit", "must be >= 1, got 0"),
        ({"topic": "x", "offset": 2}, "offset", "not supported: page with the opaque 'cursor' returned as next_cursor"),
        ({"topic": "x", "weights": {"nope": 1}}, "weights", "unknown value 'nope'"),  # as POST /v1/search
        ({"topic": "   "}, "query", "must not be empty or whitespace only"),
    ]
    for args, field, message in cases:
        result = await session.call_tool("query", args)
        assert result.is_error
        body = _json(result)["error"]
        assert body["field"] == field
        assert body["message"].startswith(message)


async def test_stdio_server_end_to_end(tmp_path: Path) -> None:
    """Tools, errors, the entry resource and status, through a real ``fabric mcp`` process."""
    async with stdio_client(_params(tmp_path / "home")) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        names = {t.name for t in (await session.list_tools()).tools}
        assert names == {"query", "ingest", "task", "cite", "status"}
        ingested = await session.call_tool("ingest", {"entries": ENTRIES})
        report = _json(ingested)
        assert (report["status"], report["report"]["created"]) == ("succeeded", 4)
        again = _json(await session.call_tool("task", {"task_id": report["task_id"]}))
        assert again["status"] == "succeeded"
        unknown = await session.call_tool("task", {"task_id": "nope"})
        assert unknown.is_error
        assert _json(unknown)["error"]["field"] == "task_id"

        await _query_contract(session)
        await _errors(session)

        entry = await session.read_resource("knowledge://entries/e-103")
        assert json.loads(entry.contents[0].text)["content"].startswith("Rollback within 5 min")
        with pytest.raises(MCPError, match="unknown entry 'e-999'"):
            await session.read_resource("knowledge://entries/e-999")
        templates = await session.list_resource_templates()
        assert [t.uri_template for t in templates.resource_templates] == ["knowledge://entries/{entry_id}"]

        cited = _json(
            await session.call_tool(
                "cite", {"answer": "Use blue-green deploys for zero-downtime releases.", "topic": "blue-green deploys"}
            )
        )
        assert "[1]" in cited["text"]
        status = _json(await session.call_tool("status", {}))
        assert {n: lane["built"] for n, lane in status["lanes"].items()} == {
            "keyword": True,
            "vector": True,
            "graph": True,
        }


async def test_beside_a_service_it_serves_read_only(tmp_path: Path) -> None:
    """With the home held by another process (a running service), ``fabric mcp`` still answers queries and says
    why ingest is refused, instead of closing the connection."""
    from fabric.ingest.homelock import HomeLock

    home = tmp_path / "home"
    home.mkdir()
    with HomeLock(home, "fabric serve"):
        async with stdio_client(_params(home)) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            query = await session.call_tool("query", {"topic": "deployment strategy", "limit": 2})
            assert not query.is_error
            refused = await session.call_tool("ingest", {"entries": ENTRIES[:1]})
            assert refused.is_error
            message = _json(refused)["error"]["message"]
            assert message.startswith("read-only: home")
            assert "ingest through that service" in message
            status = await session.call_tool("status", {})
            assert status.structured_content["ingest_idle"] is False
