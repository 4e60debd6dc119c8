"""The MCP tools' output schemas (``outputSchema``) and the closed sets of their inputs (JSON Schema ``enum``).

The SDK publishes each schema from the tool's return annotation (``Annotated[CallToolResult, <schema>]``) and checks
every successful result's ``structuredContent`` against it; errors stay tool errors with the API's error body.
"""

from __future__ import annotations

from typing import Any, Literal

from typing_extensions import TypedDict  # pydantic reads TypedDicts from typing_extensions on Python < 3.12

__all__ = [
    "CiteOutput",
    "FusionName",
    "ModeName",
    "QueryItem",
    "QueryOutput",
    "StatusOutput",
    "TaskOutput",
]

ModeName = Literal["simple", "technical", "research", "multimedia"]
"""The query modes (per-lane time budgets)."""
FusionName = Literal["rrf", "append_fill", "score_minmax", "score_dbsf", "score_zscore"]
"""The fusion modes a call may ask for."""


class QueryItem(TypedDict):
    """One entry of a result page."""

    id: str
    topic: str
    content: str
    score_total: float
    score_lexical: float
    score_semantic: float
    score_graph: float
    graph_hops: int | None


class QueryOutput(TypedDict):
    """A result page: the entries found, the page, the cursor of the next one and the time taken."""

    total: int
    items: list[QueryItem]
    next_cursor: str | None
    retrieval_ms: int


class TaskOutput(TypedDict, total=False):
    """An ingestion task: its status, per-stage progress, the report or the error."""

    task_id: str
    status: Literal["queued", "running", "succeeded", "failed"]
    status_url: str
    source: dict[str, Any]
    attempts: int
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    progress: dict[str, Any]
    report: dict[str, Any] | None
    error: str | None
    conflicts: dict[str, str]
    created: bool


class CiteOutput(TypedDict, total=False):
    """An answer aligned with the passages: sentences with their citations, the bibliography, disagreements."""

    text: str
    sentences: list[dict[str, Any]]
    bibliography: list[dict[str, Any]]
    disagreements: list[dict[str, Any]]


class StatusOutput(TypedDict):
    """The engine's lanes and load, and whether ingestion is idle."""

    open: bool
    lanes: dict[str, Any]
    inflight: int
    abandoned_running: int
    loop_lag_ms: float | None
    ingest_idle: bool
