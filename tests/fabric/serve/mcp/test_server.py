"""The MCP tools in-process (the SDK's in-memory ``mcp.Client``) over an engine with fake lanes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from fabric.core.models import Hit, LaneKind
from fabric.ingest.audit import AuditLog
from fabric.query.engine import Engine
from fabric.serve.mcp.server import build_server
from fabric.serve.service import ingest_tasks
from fabric.settings import load_settings
from lanes.base import LaneResources
from lanes.fake import FakeLane
from tests.support.embedded import BagEmbedder
from tests.support.settings import make_settings, quiet_logs  # noqa: F401


def _hits(ids: list[str]) -> list[Hit]:
    return [Hit(id=i, rank=r, score=1.0 / r, title=f"topic {i}", text=f"content of {i}") for r, i in enumerate(ids, 1)]


@asynccontextmanager
async def _client(tmp_path: Path) -> AsyncIterator[Client]:
    """An in-memory MCP client of a server over keyword + vector fake lanes (3 distinct items).

    A context manager, not a fixture: the SDK's task groups must close in the task that opened them.
    """
    settings = make_settings(tmp_path, {"kw": {"kind": LaneKind.KEYWORD}, "vec": {"kind": LaneKind.VECTOR}})
    lanes = {
        "kw": FakeLane(name="kw", kind=LaneKind.KEYWORD, hits=_hits(["a", "b"])),
        "vec": FakeLane(name="vec", kind=LaneKind.VECTOR, hits=_hits(["b", "c"])),
    }
    engine = Engine(settings, lanes=lanes)
    tasks = ingest_tasks(engine)
    async with engine, Client(build_server(engine, tasks)) as c:
        yield c


def _page(result: Any) -> dict[str, Any]:
    return json.loads(result.content[1].resource.text)


async def test_query_content_array(tmp_path: Path) -> None:
    """Seed 001's two content items; lane parts add up with the factor parts to score_total."""
    async with _client(tmp_path) as client:
        result = await client.call_tool("query", {"topic": "deployment & strategy", "limit": 2})
        assert not result.is_error
        assert result.content[0].text == "Found 3 entries; showing top 2 by hybrid score."
        assert result.content[1].resource.uri == "knowledge://entries?topic=deployment+%26+strategy&limit=2"
        page = _page(result)
        assert [i["id"] for i in page["items"]] == ["b", "a"]
        assert page["items"][0]["topic"] == "topic b"
        assert page["items"][0]["content"] == "content of b"
        b = page["items"][0]
        assert b["score_lexical"] > 0.0
        assert b["score_semantic"] > 0.0
        assert b["score_graph"] == 0.0
        assert b["score_lexical"] + b["score_semantic"] <= b["score_total"] + 1e-6
        last = await client.call_tool(
            "query", {"topic": "deployment & strategy", "limit": 2, "cursor": page["next_cursor"]}
        )
        assert last.content[0].text == "Found 3 entries; showing top 1 by hybrid score."
        assert _page(last)["next_cursor"] is None


async def test_weights_and_fusion_pass_through(tmp_path: Path) -> None:
    async with _client(tmp_path) as client:
        plain = _page(await client.call_tool("query", {"topic": "q", "limit": 3}))
        vec = _page(
            await client.call_tool("query", {"topic": "q", "limit": 3, "weights": {"semantic": 5}, "fusion": "rrf"})
        )
        assert [i["id"] for i in plain["items"]][:2] == ["b", "a"]
        assert [i["id"] for i in vec["items"]] == ["b", "c", "a"]
        assert all(i["score_lexical"] < i["score_semantic"] for i in vec["items"] if i["id"] == "c")


@pytest.mark.parametrize(("name", "value"), [("fusion", "magic"), ("mode", "fast")])
async def test_a_value_outside_an_enum_is_refused_by_the_schema(tmp_path: Path, name: str, value: str) -> None:
    """``mode`` and ``fusion`` are enums of the input schema: a value outside them is a tool error naming the field
    and its valid values, and the server goes on."""
    async with _client(tmp_path) as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "query")
        schema = tool.input_schema["properties"][name]
        enum = next(s["enum"] for s in schema["anyOf"] if "enum" in s)
        assert ("research" if name == "mode" else "rrf") in enum
        result = await client.call_tool("query", {"topic": "q", name: value})
        assert result.is_error
        assert name in result.content[0].text
        assert not (await client.call_tool("status", {})).is_error


async def test_every_tool_publishes_an_output_schema(tmp_path: Path) -> None:
    """Each tool declares the shape of its structured content, and a query's structured content follows it."""
    async with _client(tmp_path) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"query", "ingest", "task", "cite", "status"}
        assert all(t.output_schema for t in tools.values())
        assert {"total", "items", "next_cursor", "retrieval_ms"} <= set(tools["query"].output_schema["properties"])
        result = await client.call_tool("query", {"topic": "q", "limit": 2})
        assert not result.is_error
        assert set(result.structured_content) == {"total", "items", "next_cursor", "retrieval_ms"}
        assert len(result.structured_content["items"]) <= 2
        status = await client.call_tool("status", {})
        assert status.structured_content["open"] is True


@pytest.mark.parametrize(
    ("args", "field", "message"),
    [
        ({"topic": "q", "cursor": "garbage"}, "cursor", "invalid cursor"),
        ({"topic": "q", "weights": "kw"}, "weights", "expected NAME=WEIGHT pairs"),
        ({"topic": "q", "lanes": ["nope"]}, "lanes[0]", "unknown value 'nope'"),  # as POST /v1/search says
    ],
)
async def test_bad_input_is_a_tool_error(tmp_path: Path, args: dict[str, Any], field: str, message: str) -> None:
    async with _client(tmp_path) as client:
        result = await client.call_tool("query", args)
        assert result.is_error
        error = json.loads(result.content[0].text)["error"]
        assert error["field"] == field
        assert error["message"].startswith(message)
        assert not (await client.call_tool("status", {})).is_error  # the server goes on


async def test_other_tools(tmp_path: Path) -> None:
    async with _client(tmp_path) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"query", "ingest", "task", "cite", "status"}
        assert tools["query"].annotations.read_only_hint is True
        assert set(tools["query"].input_schema["properties"]) >= {
            "topic",
            "limit",
            "cursor",
            "weights",
            "fusion",
            "mode",
        }
        cited = await client.call_tool("cite", {"answer": "content of b", "topic": "q"})
        assert json.loads(cited.content[0].text)["sentences"][0]["citations"][0]["id"] == "b"
        empty = await client.call_tool("cite", {"answer": "  ", "topic": "q"})
        assert json.loads(empty.content[0].text) == {"error": {"field": "answer", "message": "the answer is empty"}}
        bad = await client.call_tool("ingest", {"entries": [{"title": "no id"}]})
        assert bad.is_error
        assert json.loads(bad.content[0].text)["error"]["field"].startswith("entries")
        status = json.loads((await client.call_tool("status", {})).content[0].text)
        assert set(status["lanes"]) == {"kw", "vec"}


async def test_ingest_over_stdio_is_audited_as_the_local_operator(tmp_path: Path) -> None:
    """Without a caller's key (stdio: the local operator) ingested entries are audited as ``default``'s, written by
    key ``operator``, as the CLI's are."""
    settings = load_settings(env={"FABRIC_HOME": str(tmp_path)})
    engine = Engine(settings, resources=LaneResources(home=tmp_path, embedder=BagEmbedder()))
    tasks = ingest_tasks(engine)
    async with engine:
        await tasks.start()
        try:
            async with Client(build_server(engine, tasks)) as client:
                done = await client.call_tool("ingest", {"entries": [{"id": "op-1", "text": "Operator notes."}]})
                assert not done.is_error, done
        finally:
            await tasks.aclose()
    records = AuditLog(tmp_path).page("default").records
    assert [(r.entry_id, r.action, r.tenant, r.key_id) for r in records if r.subject == "entry"] == [
        ("op-1", "created", "default", "operator")
    ]


async def test_cite_has_the_http_routes_length_cap(tmp_path: Path) -> None:
    """An answer longer than POST /v1/cite accepts is refused before any work (it once held the event loop for
    minutes); one at the cap is aligned, and the server goes on."""
    from fabric.serve.openapi import CITE_LIMITS

    cap = CITE_LIMITS["answer_chars"]
    async with _client(tmp_path) as client:
        refused = await client.call_tool("cite", {"answer": "a. " * (cap // 3 + 1), "topic": "q"})
        assert refused.is_error
        assert json.loads(refused.content[0].text)["error"] == {
            "field": "answer", "message": f"at most {cap} characters, got {3 * (cap // 3 + 1)}",
        }  # fmt: skip
        at_cap = await client.call_tool("cite", {"answer": ("content of b " * cap)[:cap], "topic": "q"})
        assert not at_cap.is_error
        assert not (await client.call_tool("status", {})).is_error


async def test_cite_over_the_work_budget_is_an_error_result(tmp_path: Path) -> None:
    """An answer within the length cap but of more sentences than one alignment takes is an error result naming
    the answer (the attack's ``"a! "`` repeated cost seconds of CPU a call), and the server goes on."""
    from fusion.citations import MAX_SENTENCES

    async with _client(tmp_path) as client:
        refused = await client.call_tool("cite", {"answer": "Content of b! " * (MAX_SENTENCES + 1), "topic": "q"})
        assert refused.is_error
        error = json.loads(refused.content[0].text)["error"]
        assert error["field"] == "answer"
        assert f"at most {MAX_SENTENCES} sentences per alignment, got {MAX_SENTENCES + 1}" in error["message"]
        within = await client.call_tool("cite", {"answer": "Content of b! " * MAX_SENTENCES, "topic": "q"})
        assert not within.is_error
