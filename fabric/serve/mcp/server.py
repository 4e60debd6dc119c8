"""The MCP server (official ``mcp`` SDK, :class:`~mcp.server.mcpserver.MCPServer`) over one open engine.

Over the service's ``/mcp`` route every tool answers from the caller's tenant (its engine and ingestion tasks,
:mod:`fabric.serve.tenant_engines`); over stdio, from the engine it was built over.

Tools:

``query``
    The API contract's arguments: ``topic`` (the query), ``limit`` (page size: the API's ``top_k``), ``cursor``,
    ``weights``
    (lane or ``lexical``/``semantic``/``graph`` → weight), ``fusion`` (``rrf``, ``append_fill``, ``score_minmax``,
    ``score_dbsf``, ``score_zscore``), ``mode`` (``simple``, ``technical``, ``research``, ``multimedia``) and
    ``lanes``. Returns the API contract's content array: a text item "Found N entries; showing top K by hybrid score."
    and
    an embedded resource ``knowledge://entries?topic=…&limit=…`` (``application/json``) whose text is the JSON of
    ``items`` (``id``, ``topic``, ``content``, ``score_total``, ``score_lexical``, ``score_semantic``,
    ``score_graph``, ``graph_hops``), ``next_cursor`` and ``retrieval_ms``.
``ingest``
    ``entries`` (the JSONL entry format) → the finished task with its report when small, else the task handle. The
    audit history records the entries as the caller's tenant and key id (over stdio: the local operator,
    :data:`fabric.ingest.audit.OPERATOR_KEY_ID`), as ``POST /v1/ingest`` does. A writer key may not replace an entry
    the operator or an admin key wrote, or one marked trusted (:mod:`fabric.ingest.provenance`): a tool error naming
    the rule, as ``POST /v1/ingest`` answers ``403``.
``task``
    The status of a handle returned by ``ingest``.
``cite``
    Aligns an answer's sentences with the passages a query retrieves (the fusion policy's citations).
``status``
    Lanes (built, opened, provider health) and in-flight queries.

Resource template ``knowledge://entries/{entry_id}``: one stored entry (chunk) by id.

Every tool publishes an output schema (:mod:`fabric.serve.mcp.schemas`) and answers structured content beside its
text; ``mode`` and ``fusion`` are enums in the input schema. Errors are tool errors (``isError``) whose text is the
API's error body, ``{"error": {"field", "message"}}``,
with the same messages as ``POST /v1/search`` and ``POST /v1/ingest``; bad input never ends the server.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Annotated, Any
from urllib.parse import urlencode

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, EmbeddedResource, TextContent, TextResourceContents, ToolAnnotations

from fabric import __version__
from fabric.core.errors import FabricError, PartialResultError, QueryError
from fabric.core.models import SearchResult
from fabric.ingest.audit import OPERATOR_KEY_ID
from fabric.ingest.provenance import OPERATOR
from fabric.query.engine import Engine
from fabric.query.validation import tool_body, validate_body
from fabric.serve.keys.store import Role
from fabric.serve.limits.admission import CURRENT_ADMISSION, Overloaded
from fabric.serve.mcp.entries import read_entry
from fabric.serve.mcp.schemas import (
    CiteOutput,
    FusionName,
    ModeName,
    QueryOutput,
    StatusOutput,
    TaskOutput,
)
from fabric.serve.openapi import CITE_LIMITS
from fabric.serve.tasks.queue import IngestTasks, TaskStatus
from fabric.serve.tasks.submission import SubmitError, check_operator_fields, check_provenance, parse_submission
from fabric.serve.tenant_engines import CURRENT_PRINCIPAL, CURRENT_SCOPE

__all__ = ["ENTRY_URI", "FabricTools", "build_server", "page_payload", "query_content"]

ENTRY_URI = "knowledge://entries/{entry_id}"
"""The resource template of one entry."""

_INSTRUCTIONS = (
    "Federated retrieval over the operator's knowledge base: call `query` with a topic; page with `cursor`; "
    "tune lane weights (`weights`) and the fusion mode (`fusion`) per call. Read one entry with the resource "
    "template knowledge://entries/{entry_id}."
)


def _error(field: str | None, message: str, **extra: Any) -> CallToolResult:
    """A tool error carrying the API's error body."""
    body = {"error": {"field": field, "message": message, **extra}}
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(body, ensure_ascii=False))], is_error=True)


def _json(data: Any) -> CallToolResult:
    """A result: the JSON as text (for models) and as structured content (checked against the tool's schema)."""
    text = json.dumps(data, ensure_ascii=False, default=str)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=json.loads(text))


def page_payload(result: SearchResult) -> dict[str, Any]:
    """A result page as the API contract's JSON: ``items`` (id, topic, content, score ledger, graph hops),
    ``next_cursor`` and ``retrieval_ms``."""
    items = []
    for it in result.items:
        d = result.item_dict(it)
        items.append(
            {
                "id": it.id,
                "topic": it.hit.title,
                "content": it.hit.text,
                "score_total": d["score_total"],
                "score_lexical": d["score_lexical"],
                "score_semantic": d["score_semantic"],
                "score_graph": d["score_graph"],
                "graph_hops": it.hit.graph_hops,
            }
        )
    return {
        "items": items,
        "next_cursor": result.next_cursor,
        "retrieval_ms": round(result.timings.get("total_ms", 0.0)),
    }


def query_content(result: SearchResult, topic: str, limit: int) -> list[TextContent | EmbeddedResource]:
    """The API contract's content array for one result page."""
    payload = page_payload(result)
    n = "entry" if result.total == 1 else "entries"
    text = f"Found {result.total} {n}; showing top {len(payload['items'])} by hybrid score."
    uri = "knowledge://entries?" + urlencode({"topic": topic, "limit": limit})
    resource = TextResourceContents(
        uri=uri, mime_type="application/json", text=json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    )
    return [TextContent(type="text", text=text), EmbeddedResource(type="resource", resource=resource)]


async def _search(engine: Engine, data: dict[str, Any]) -> SearchResult | CallToolResult:
    """Validate and run a query; a failure comes back as the tool error the API would answer."""
    admission = CURRENT_ADMISSION.get()  # over /mcp: the service's admission control, as for /v1/search
    try:
        request = validate_body(tool_body(data), engine.settings)  # the HTTP door's contract
        if admission is None:
            return await engine.search(request)
        async with admission.slot():
            return await engine.search(request)
    except Overloaded as exc:
        return _error(None, str(exc), reason=exc.reason, retry_after_s=exc.retry_after_s)
    except PartialResultError as exc:
        return _error(exc.field, exc.message, lanes=exc.lanes)
    except QueryError as exc:
        return _error(exc.field, exc.message)
    except FabricError as exc:
        return _error(None, str(exc))


class FabricTools:
    """The tools and the entry resource, over one engine and its ingestion tasks (opened and closed by the caller).

    Each method's signature is its tool's input schema and its docstring the tool's description.
    """

    def __init__(self, engine: Engine, tasks: IngestTasks, *, read_only: str | None = None) -> None:
        self._engine = engine
        self._tasks = tasks
        self.read_only = read_only
        """Why ``ingest`` and ``task`` are refused (another process holds the home), or None."""

    @property
    def engine(self) -> Engine:
        """The engine of the request's tenant (:data:`fabric.serve.tenant_engines.CURRENT_SCOPE`, set by the service
        around ``/mcp`` requests), else the engine the server was built over (stdio, open mode)."""
        scope = CURRENT_SCOPE.get()
        return scope.engine if scope is not None else self._engine

    @property
    def tasks(self) -> IngestTasks:
        """The ingestion tasks of the request's tenant, else the ones the server was built over."""
        scope = CURRENT_SCOPE.get()
        return scope.tasks if scope is not None else self._tasks

    async def query(
        self,
        topic: str,
        limit: int | None = None,
        cursor: str | None = None,
        weights: dict[str, float] | str | None = None,
        fusion: FusionName | None = None,
        mode: ModeName | None = None,
        lanes: list[str] | None = None,
        offset: Any = None,
    ) -> Annotated[CallToolResult, QueryOutput]:
        """Hybrid search (lexical, semantic, graph lanes fused) for `topic`; `limit` items per page (default 10).

        Page with the `cursor` returned as `next_cursor` (offsets are not supported). `weights` sets lane
        weights for this call, e.g. {"semantic": 2, "graph": 0.5}; `fusion` is rrf, append_fill, score_minmax,
        score_dbsf or score_zscore (the default); `mode` is simple, technical, research or multimedia (per-lane
        time budgets).
        """
        data: dict[str, Any] = {"query": topic, "limit": limit, "cursor": cursor, "weights": weights}
        data |= {"fusion": fusion, "mode": mode, "lanes": lanes}
        if offset is not None:
            data["offset"] = offset
        result = await _search(self.engine, data)
        if isinstance(result, CallToolResult):
            return result
        content: list[Any] = list(query_content(result, topic, limit if limit is not None else 10))
        return CallToolResult(content=content, structured_content={"total": result.total, **page_payload(result)})

    async def ingest(
        self, entries: list[dict[str, Any]], idempotency_key: str | None = None
    ) -> Annotated[CallToolResult, TaskOutput]:
        """Add entries ({"id", "title", "text", optional "url", "published_at", ...}) to the knowledge base.

        Small batches run now and return the finished task with its report; larger ones return a task handle
        to poll with the `task` tool. The same entries (or the same idempotency_key) return the same task.
        """
        if self.read_only:
            return _error("ingest", self.read_only)
        config, tasks = self.engine.settings.ingest, self.tasks
        who = CURRENT_PRINCIPAL.get()  # None on stdio: the local operator
        if who is not None and who.role < Role.WRITER:
            return _error("authorization", f"ingest needs the writer role (this key is {who.role.label})")
        try:
            sub = await asyncio.to_thread(parse_submission, {"entries": entries}, config, tasks.root)
            check_operator_fields(sub, allowed=who is None or who.role >= Role.ADMIN)
            sub = replace(sub, tenant=tasks.tenant, key_id=OPERATOR_KEY_ID if who is None else who.key_id)
            sub = replace(sub, role=OPERATOR if who is None else who.role.label)
            await asyncio.to_thread(check_provenance, sub, (self.engine.resources or self.engine.settings).home)
            inline = sub.count <= config.sync_max_entries and tasks.idle
            task, created = await tasks.submit(sub, key=idempotency_key)
        except SubmitError as exc:
            return _error(exc.field, exc.message)
        if inline:
            task = await tasks.wait(task)
        body = {**task.to_dict(), "created": created}
        if inline and task.status is TaskStatus.FAILED:
            return _error(None, task.error or "ingestion failed", task=body)
        return _json(body)

    async def task(self, task_id: str) -> Annotated[CallToolResult, TaskOutput]:
        """Status of an ingestion task: per-stage progress, timestamps, the report or the error."""
        if self.read_only:
            return _error("task_id", self.read_only)
        found = await self.tasks.aget(task_id)
        if found is None:
            msg = "unknown task (records of the most recent finished tasks are kept, see ingest.history)"
            return _error("task_id", msg)
        return _json(found.to_dict())

    async def cite(
        self, answer: str, topic: str, limit: int | None = None, threshold: float = 0.7, max_per_sentence: int = 3
    ) -> Annotated[CallToolResult, CiteOutput]:
        """Align each sentence of `answer` with the passages `topic` retrieves: markers, bibliography, conflicts."""
        from fusion.citations import align_citations

        if not answer.strip():
            return _error("answer", "the answer is empty")
        if len(answer) > CITE_LIMITS["answer_chars"]:  # the same cap as POST /v1/cite: one call never holds a core
            return _error("answer", f"at most {CITE_LIMITS['answer_chars']} characters, got {len(answer)}")
        if not 0.0 < threshold <= 1.0:
            return _error("threshold", "must be in (0, 1]")
        if max_per_sentence < 1:
            return _error("max_per_sentence", "must be >= 1")
        result = await _search(self.engine, {"query": topic, "limit": limit})
        if isinstance(result, CallToolResult):
            return result
        hits = [it.hit for it in result.items]
        try:
            aligned = await asyncio.to_thread(  # off the event loop: the other tenants' requests go on meanwhile
                align_citations, answer, hits, threshold=threshold, max_per_sentence=max_per_sentence
            )
        except QueryError as exc:  # over the alignment's work budget (fusion.citations)
            return _error(exc.field, exc.message)
        return _json(aligned.to_dict())

    async def status(self) -> Annotated[CallToolResult, StatusOutput]:
        """Lanes (built, opened, provider health and penalties), in-flight queries and ingestion state."""
        health = self.engine.health()
        body = {k: health[k] for k in ("open", "lanes", "inflight", "abandoned_running", "loop_lag_ms")}
        body["ingest_idle"] = self.tasks.idle and not self.read_only
        return _json(body)

    async def entry(self, entry_id: str) -> str:
        """One stored entry (chunk) by id: title, text, url, document, provenance."""
        return json.dumps(await read_entry(self.engine, entry_id), ensure_ascii=False)


def build_server(engine: Engine, tasks: IngestTasks, *, read_only: str | None = None) -> MCPServer:
    """The MCP server over an engine and its ingestion tasks (both opened and closed by the caller); with
    ``read_only`` (the reason), ``ingest`` and ``task`` are refused with it."""
    server: MCPServer = MCPServer(name="retrieval-fabric", version=__version__, instructions=_INSTRUCTIONS)
    tools = FabricTools(engine, tasks, read_only=read_only)
    reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    for fn in (tools.query, tools.task, tools.cite, tools.status):
        server.add_tool(fn, structured_output=True, annotations=reads)
    server.add_tool(tools.ingest, structured_output=True, annotations=ToolAnnotations(idempotent_hint=True))
    server.resource(ENTRY_URI, name="entry", mime_type="application/json")(tools.entry)
    return server
