"""A small typed async client for the HTTP API of ``fabric serve`` (aiohttp).

Usage::

    async with FabricClient("http://127.0.0.1:8080") as client:
        page = await client.search("deployment strategy", limit=5, weights={"semantic": 2})
        for item in page.items:
            print(item.id, item.score_total, item.score_semantic)
        if page.next_cursor:
            more = await client.search("deployment strategy", limit=5, weights={"semantic": 2},
                                       cursor=page.next_cursor)

Errors come back as the exceptions the engine raises in-process: a ``400`` as
:class:`~fabric.core.errors.QueryError` (same field and message), a strict request's ``503`` as
:class:`~fabric.core.errors.PartialResultError`; any other failure (connection, ``5xx``, a body that is not the API's)
as :class:`FabricClientError`. :meth:`SearchPage.from_dict` also reads ``SearchResult.to_dict()``, so code written
against the client's types works on an in-process result too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import aiohttp

from fabric.core.errors import FabricError, PartialResultError, QueryError

if TYPE_CHECKING:
    from fabric.core.models import SearchResult

__all__ = ["FabricClient", "FabricClientError", "PageItem", "SearchPage"]


class FabricClientError(FabricError):
    """The service could not be reached or answered something other than a result or a validation error."""

    def __init__(self, message: str, *, status: int | None = None, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


@dataclass(frozen=True, slots=True, kw_only=True)
class PageItem:
    """One result item (the API's item JSON, typed)."""

    id: str
    title: str
    text: str
    """The snippet the API returns (the passage, cut at 300 characters)."""
    url: str
    score_total: float
    score_lexical: float
    """The keyword lanes' part of ``score_total`` (the API contract)."""
    score_semantic: float
    """The vector lanes' part of ``score_total``."""
    score_graph: float
    """The graph lanes' part of ``score_total``."""
    contributions: Mapping[str, float]
    """Every part of ``score_total``: lane kinds and ranking factors (they add up to it)."""
    scores: Mapping[str, float]
    """The raw components: rrf, fused, factors and each lane kind's native score."""
    lanes: tuple[str, ...]
    ranks: Mapping[str, int]
    graph_hops: int | None = None
    published_at: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)
    """The item's JSON as received."""

    @property
    def snippet(self) -> str:
        """The passage as the API shows it, cut at 300 characters (the same as :attr:`text`)."""
        return self.text

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PageItem:
        """Read one item of the result JSON."""
        return cls(
            id=str(d["id"]),
            title=str(d.get("title", "")),
            text=str(d.get("snippet", d.get("text", ""))),
            url=str(d.get("url", "")),
            score_total=float(d.get("score_total", 0.0)),
            score_lexical=float(d.get("score_lexical", 0.0)),
            score_semantic=float(d.get("score_semantic", 0.0)),
            score_graph=float(d.get("score_graph", 0.0)),
            contributions=dict(d.get("contributions", {})),
            scores=dict(d.get("scores", {})),
            lanes=tuple(d.get("lanes", ())),
            ranks=dict(d.get("ranks", {})),
            graph_hops=d.get("graph_hops"),
            published_at=d.get("published_at"),
            raw=dict(d),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchPage:
    """One page of results (the API's result JSON, typed)."""

    query: str
    items: tuple[PageItem, ...]
    total: int
    """Matching entries: the fused set before paging."""
    next_cursor: str | None
    partial: bool
    lanes: Mapping[str, Mapping[str, Any]]
    """Per lane: status, provider, latency_ms, hits, weight, error, health."""
    timings: Mapping[str, float]
    trace_id: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SearchPage:
        """Read the result JSON (``POST /v1/search`` or ``SearchResult.to_dict()``)."""
        return cls(
            query=str(d.get("query", "")),
            items=tuple(PageItem.from_dict(i) for i in d.get("items", ())),
            total=int(d.get("total", len(d.get("items", ())))),
            next_cursor=d.get("next_cursor"),
            partial=bool(d.get("partial", False)),
            lanes=dict(d.get("lanes", {})),
            timings=dict(d.get("timings", {})),
            trace_id=str(d.get("trace_id", "")),
            raw=dict(d),
        )

    @classmethod
    def from_result(cls, result: SearchResult) -> SearchPage:
        """The page of an in-process :class:`~fabric.core.models.SearchResult`, the same as reading its ``to_dict()``
        without building the parts a page does not keep (receipt, pre-flight, dedup counts); ``raw`` is empty."""
        return cls(
            query=result.query,
            items=tuple(PageItem.from_dict(result.item_dict(it)) for it in result.items),
            total=result.total,
            next_cursor=result.next_cursor,
            partial=result.partial,
            lanes={name: out.to_dict() for name, out in result.lanes.items()},
            timings={k: round(v, 3) for k, v in result.timings.items()},
            trace_id=result.trace_id,
        )

    def lane_status(self) -> dict[str, str]:
        """Lane → status (success, timeout, error, skipped, suspended, fallback)."""
        return {name: str(lane.get("status", "")) for name, lane in self.lanes.items()}


def search_body(query: str, **params: Any) -> dict[str, Any]:
    """The request JSON: ``query`` plus the given request fields (None values left out)."""
    return {"query": query, **{k: v for k, v in params.items() if v is not None}}


class FabricClient:
    """Client of one ``fabric serve`` (see the module docstring).

    Args:
        base_url: e.g. ``http://127.0.0.1:8080``.
        session: an aiohttp session to use (not closed by the client); by default one is created on first use.
        api_key: the service's API key (``fabric keys create``), sent as ``Authorization: Bearer <key>``.
        headers: extra headers on every request (a session you pass gets them too).
        timeout_s: total timeout of one request.
    """

    def __init__(
        self,
        base_url: str,
        *,
        session: aiohttp.ClientSession | None = None,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._session = session
        self._owns = session is None
        self._headers = dict(headers or {})
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)

    @property
    def headers(self) -> dict[str, str]:
        """The headers sent with every request (a copy; the API key among them as ``Authorization``)."""
        return dict(self._headers)

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
            self._owns = True
        return self._session

    async def _call(self, method: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None) -> Any:
        try:
            sent = {**self._headers, **(headers or {})}
            async with self._http().request(method, self.base_url + path, json=body, headers=sent) as resp:
                try:
                    data = await resp.json(content_type=None)
                except ValueError:
                    data = None
                status = resp.status
        except aiohttp.ClientError as exc:
            raise FabricClientError(f"{method} {path}: {type(exc).__name__}: {exc}") from None
        err = data.get("error") if isinstance(data, dict) else None
        if status < 300 and data is not None:
            return data
        if status == 400 and isinstance(err, dict):
            raise QueryError(str(err.get("field") or "request"), str(err.get("message", "")))
        if status == 503 and isinstance(err, dict) and isinstance(err.get("lanes"), dict):
            raise PartialResultError(dict(err["lanes"]))
        message = err.get("message") if isinstance(err, dict) else None
        raise FabricClientError(
            f"{method} {path}: HTTP {status}: {message or 'unexpected answer'}", status=status, body=data
        )

    async def search(
        self,
        query: str,
        *,
        limit: int | None = None,
        top_k: int | None = None,
        cursor: str | None = None,
        weights: Mapping[str, float] | None = None,
        fusion: str | None = None,
        mode: str | None = None,
        lanes: Sequence[str] | None = None,
        constraints: Mapping[str, Any] | None = None,
        budget_ms: float | None = None,
        strict: bool | None = None,
    ) -> SearchPage:
        """``POST /v1/search``.

        Raises:
            QueryError: the service refused the request (field and message as the engine names them).
            PartialResultError: ``strict`` and some lane did not succeed.
            FabricClientError: anything else.
        """
        body = search_body(
            query,
            limit=limit,
            top_k=top_k,
            cursor=cursor,
            weights=dict(weights) if weights is not None else None,
            fusion=fusion,
            mode=mode,
            lanes=list(lanes) if lanes is not None else None,
            constraints=dict(constraints) if constraints is not None else None,
            budget_ms=budget_ms,
            strict=strict,
        )
        return SearchPage.from_dict(await self._call("POST", "/v1/search", body))

    async def ingest(
        self, entries: Sequence[Mapping[str, Any]], *, idempotency_key: str | None = None, run_async: bool = False
    ) -> dict[str, Any]:
        """``POST /v1/ingest`` with entries: the finished task (small batches) or the queued task's handle."""
        body: dict[str, Any] = {"entries": [dict(e) for e in entries]}
        if run_async:
            body["async"] = True
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        task: dict[str, Any] = await self._call("POST", "/v1/ingest", body, headers)
        return task

    async def task(self, task_id: str) -> dict[str, Any]:
        """``GET /v1/ingest/<task_id>``."""
        found: dict[str, Any] = await self._call("GET", f"/v1/ingest/{task_id}")
        return found

    async def ready(self) -> dict[str, Any]:
        """``GET /readyz``: lanes and their health (raises :class:`FabricClientError` when not ready)."""
        body: dict[str, Any] = await self._call("GET", "/readyz")
        return body

    async def aclose(self) -> None:
        """Close the session the client created."""
        if self._owns and self._session is not None:
            await self._session.close()
        self._session = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
