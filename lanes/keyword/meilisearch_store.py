"""Meilisearch store writer (:class:`fabric.ingest.model.StoreWriter`): index created and configured, documents
upserted, tasks awaited within a bound.

Speaks Meilisearch's REST API through the shared guarded aiohttp session (see :mod:`lanes.keyword.meilisearch`
for why REST rather than the synchronous SDK); it reads the same ``[lanes.<name>.options]`` as the lane (``url``,
``api_key``, ``index``) plus ``task_timeout_s`` (default 60). When the app injected no session (a bare ingest),
it opens its own, guarded to the configured host, and closes it in :meth:`aclose`.

Every write is an asynchronous Meilisearch *task*: the writer polls ``GET /tasks/{uid}`` until it succeeds, fails
or ``task_timeout_s`` passes (never an unbounded wait). Index settings applied on open: searchable ``title``,
``text``; filterable ``published_ts``, ``domain``, ``doc_id``, ``source_kind``, ``trust``; sortable
``published_ts``. Document ids are :func:`fabric.writers.chunk_key` (Meilisearch allows only ``[A-Za-z0-9_-]``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import aiohttp
from yarl import URL

from fabric.errors import IngestError, LaneError
from fabric.httpclient import AllowList, HostRule, create_session, fetch
from fabric.ingest.model import Chunk
from fabric.writers import chunk_key, chunk_record
from lanes._options import LaneOptions
from lanes.base import LaneResources, LaneSpec

__all__ = ["INDEX_SETTINGS", "MeilisearchStore"]

INDEX_SETTINGS: dict[str, list[str]] = {
    "searchableAttributes": ["title", "text"],
    "filterableAttributes": ["published_ts", "domain", "doc_id", "source_kind", "trust"],
    "sortableAttributes": ["published_ts"],
}
"""Settings applied to the index on open."""


class MeilisearchStore:
    """Upserts chunk documents into one Meilisearch index."""

    store = "meilisearch"
    needs_vectors = False

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        opts = LaneOptions(spec)
        self.url = opts.text("url").rstrip("/")
        self.index = opts.text("index", "chunks")
        api_key = opts.text("api_key", "")
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout_s = opts.number("timeout_s", 10.0)
        self.task_timeout_s = opts.number("task_timeout_s", 60.0)
        self.batch_size = opts.integer("batch_size", 1000)
        self.session: aiohttp.ClientSession | None = resources.http
        self._own_session = False
        self._ready = False

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        try:
            resp = await fetch(
                self.session, method, self.url + path, json_body=body, headers=self.headers,
                timeout_s=self.timeout_s, provider="meilisearch",
            )
            return resp.json(provider="meilisearch") if resp.body else {}
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
            host = URL(self.url).host or ""
            self.session = create_session(AllowList.of([HostRule(host, private_ok=True)]))
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
