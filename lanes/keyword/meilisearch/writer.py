"""Meilisearch store writer (:class:`fabric.core.chunks.StoreWriter`): index created and configured, documents
upserted, tasks awaited within a bound.

Speaks Meilisearch's REST API through the shared guarded aiohttp session (see :mod:`lanes.keyword.meilisearch.lane`
for why REST rather than the synchronous SDK). The lane and the writer share :class:`MeiliOptions` (one parser
of ``[lanes.<name>.options]``) and :func:`meili_request` (one HTTP call with one error mapping); the writer turns
a lane error into an :class:`~fabric.core.errors.IngestError`. When the app injected no session (a bare ingest), it
opens its own, guarded to the configured host, and closes it in :meth:`aclose`.

Every write is an asynchronous Meilisearch *task*: the writer polls ``GET /tasks/{uid}`` until it succeeds, fails
or ``task_timeout_s`` passes (never an unbounded wait). Index settings applied on open: searchable ``title``,
``text``; filterable ``published_ts``, ``domain``, ``doc_id``, ``source_kind``, ``trust``; sortable
``published_ts``. Document ids are :func:`lanes.server_records.chunk_key` (Meilisearch allows only ``[A-Za-z0-9_-]``).

The writer lists the chunk ids it holds (:class:`~fabric.core.chunks.ListableStore`, for ``fabric check``):
``POST /indexes/{uid}/documents/fetch`` with ``fields: ["id", "chunk_id"]``, paged by ``limit`` (``batch_size``)
and ``offset`` until the answer's ``total`` is reached (the documented paginated answer ``{results, offset,
limit, total}``; the route exists since Meilisearch 1.2, the compose stack runs 1.16).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from fabric.core.chunks import Chunk
from fabric.core.errors import IngestError, LaneError, LaneUnavailable
from fabric.core.tenants import DEFAULT_TENANT, scoped_name
from fabric.net.httpclient import AllowList, HostRule, create_session, fetch, raise_for_status
from lanes._options import LaneOptions
from lanes.base import LaneResources, LaneSpec
from lanes.server_records import chunk_key, chunk_record

__all__ = ["INDEX_SETTINGS", "MeiliOptions", "MeilisearchWriter", "meili_request"]

INDEX_SETTINGS: dict[str, list[str]] = {
    "searchableAttributes": ["title", "text"],
    "filterableAttributes": ["published_ts", "domain", "doc_id", "source_kind", "trust"],
    "sortableAttributes": ["published_ts"],
}
"""Settings applied to the index on open."""

_MAX_UID = 400
"""Longest index uid Meilisearch accepts (bytes; our uids are ASCII)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MeiliOptions:
    """``[lanes.<name>.options]`` of a Meilisearch lane, read once for the lane and its writer."""

    url: str
    """Server URL (required; ``FABRIC_MEILI_URL``)."""
    index: str = "chunks"
    """Index uid: ``options.index`` for the ``default`` tenant, ``<index>__<tenant>`` for another
    (:func:`fabric.core.tenants.scoped_name`: one index per tenant)."""
    headers: Mapping[str, str]
    """``Authorization: Bearer <api_key>`` when ``api_key`` (``FABRIC_MEILI_KEY``) is set."""
    timeout_s: float = 5.0
    """Per search request."""
    keep_undated: bool = True
    """A date bound keeps documents without a date."""
    write_timeout_s: float = 10.0
    """Per write request of the writer."""
    task_timeout_s: float = 60.0
    """How long the writer waits for one Meilisearch task."""
    batch_size: int = 1000
    """Documents per upsert request."""

    @classmethod
    def parse(cls, spec: LaneSpec, tenant: str = DEFAULT_TENANT) -> MeiliOptions:
        """Read and validate the options (a :class:`~fabric.core.errors.ConfigError` names a bad key), with the index
        of ``tenant``."""
        opts = LaneOptions(spec)
        api_key = opts.text("api_key", "")
        return cls(
            url=opts.text("url").rstrip("/"),
            index=scoped_name(opts.text("index", "chunks"), tenant, limit=_MAX_UID),
            headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
            timeout_s=opts.number("timeout_s", 5.0),
            keep_undated=opts.flag("keep_undated", True),
            write_timeout_s=opts.number("write_timeout_s", 10.0),
            task_timeout_s=opts.number("task_timeout_s", 60.0),
            batch_size=opts.integer("batch_size", 1000),
        )


async def meili_request(
    session: aiohttp.ClientSession | None,
    opts: MeiliOptions,
    method: str,
    path: str,
    body: Any = None,
    *,
    timeout_s: float,
    lane: str = "",
) -> Any:
    """One Meilisearch REST call → its JSON answer (``{}`` when empty); errors mapped onto lane errors.

    Raises:
        LaneUnavailable: the index does not exist (404: nothing ingested yet), or the server is down.
        LaneError: any other failure, with Meilisearch's ``code: message`` in the text.
    """
    resp = await fetch(
        session,
        method,
        opts.url + path,
        json_body=body,
        headers=dict(opts.headers),
        timeout_s=timeout_s,
        lane=lane,
        provider="meilisearch",
        check_status=False,
    )
    if resp.status == 404:
        raise LaneUnavailable(f"index {opts.index!r} not found (nothing ingested?)", lane=lane, provider="meilisearch")
    detail = ""
    if resp.status >= 400 and resp.body.startswith(b"{"):
        err = resp.json()
        detail = f"{err.get('code')}: {err.get('message')}" if isinstance(err, dict) else ""
    raise_for_status(resp, lane=lane, provider="meilisearch", detail=detail)
    return resp.json(lane=lane, provider="meilisearch") if resp.body else {}


class MeilisearchWriter:
    """Upserts chunk documents into one Meilisearch index."""

    store = "meilisearch"
    needs_vectors = False

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        self.opts = MeiliOptions.parse(spec, resources.tenant)
        self.url, self.index = self.opts.url, self.opts.index
        self.task_timeout_s = self.opts.task_timeout_s
        self.batch_size = self.opts.batch_size
        self.session: aiohttp.ClientSession | None = resources.http
        self._own_session = False
        self._ready = False

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        try:
            return await meili_request(self.session, self.opts, method, path, body, timeout_s=self.opts.write_timeout_s)
        except LaneError as exc:
            raise IngestError(f"meilisearch {method} {path}: {exc}") from None

    async def wait_task(self, task: Any) -> dict[str, Any]:
        """Poll a task until it finishes (``succeeded``/``failed``/``canceled``), bounded by ``task_timeout_s``.

        Raises:
            IngestError: not a task answer, or the task did not finish in time.
        """
        uid = task.get("taskUid", task.get("uid")) if isinstance(task, dict) else None
        if uid is None:
            raise IngestError(f"meilisearch: not a task answer: {task!r}")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.task_timeout_s
        delay = 0.02
        while True:
            info = await self._call("GET", f"/tasks/{uid}")
            status = info.get("status")
            if status in ("succeeded", "failed", "canceled"):
                return dict(info)
            if loop.time() + delay > deadline:
                raise IngestError(f"meilisearch task {uid} still {status} after {self.task_timeout_s:g} s")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    async def _run(self, method: str, path: str, body: Any, what: str) -> None:
        done = await self.wait_task(await self._call(method, path, body))
        if done.get("status") != "succeeded":
            raise IngestError(f"meilisearch: {what} failed: {(done.get('error') or {}).get('message')}")

    async def open(self) -> None:
        """Create the index (primary key ``id``) if needed and apply :data:`INDEX_SETTINGS`; idempotent."""
        if self._ready:
            return
        if self.session is None:
            self.session = create_session(AllowList.of([HostRule.from_url(self.url, private_ok=True)]))
            self._own_session = True
        created = await self.wait_task(await self._call("POST", "/indexes", {"uid": self.index, "primaryKey": "id"}))
        error = created.get("error") or {}
        if created.get("status") != "succeeded" and error.get("code") != "index_already_exists":
            raise IngestError(f"meilisearch: cannot create index {self.index!r}: {error.get('message')}")
        await self._run("PATCH", f"/indexes/{self.index}/settings", INDEX_SETTINGS, "settings update")
        self._ready = True

    async def upsert(self, chunks: Sequence[Chunk]) -> None:
        """Add or replace the chunks' documents (by deterministic id), in batches."""
        await self.open()
        docs = []
        for chunk in chunks:
            rec = chunk_record(chunk)
            rec["id"] = rec.pop("key")
            docs.append(rec)
        for start in range(0, len(docs), self.batch_size):
            batch = docs[start : start + self.batch_size]
            await self._run("POST", f"/indexes/{self.index}/documents?primaryKey=id", batch, "document upsert")

    async def ids(self) -> set[str]:
        """Every chunk id the index holds (each document's ``chunk_id``), fetched in pages of ``batch_size``.

        Raises:
            IngestError: the server failed or answered something that is not a page of documents.
        """
        await self.open()
        found: set[str] = set()
        offset = 0
        while True:
            body = {"fields": ["id", "chunk_id"], "limit": self.batch_size, "offset": offset}
            page = await self._call("POST", f"/indexes/{self.index}/documents/fetch", body)
            results = page.get("results") if isinstance(page, dict) else None
            if not isinstance(results, list):
                raise IngestError(f"meilisearch: documents fetch answered no results list: {str(page)[:200]}")
            found.update(str(doc.get("chunk_id") or doc.get("id")) for doc in results if isinstance(doc, dict))
            offset += len(results)
            total = page.get("total")
            if not results or not isinstance(total, int) or offset >= total:
                return found

    async def delete(self, ids: Sequence[str]) -> None:
        """Delete the documents of these chunk ids (unknown ids are ignored by Meilisearch)."""
        if not ids:
            return
        await self.open()
        keys = [chunk_key(i) for i in ids]
        await self._run("POST", f"/indexes/{self.index}/documents/delete-batch", keys, "delete")

    async def aclose(self) -> None:
        """Close the session if this writer opened its own."""
        if self._own_session and self.session is not None:
            await self.session.close()
            self.session = None
            self._own_session = False
