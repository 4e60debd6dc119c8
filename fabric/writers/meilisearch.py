"""Meilisearch store writer: index created and configured on first use, documents upserted, tasks awaited.

Speaks Meilisearch's REST API through the shared guarded aiohttp session (see
:mod:`lanes.keyword.meilisearch` for why REST rather than the synchronous SDK). Every write is an asynchronous
Meilisearch *task*: the writer polls ``GET /tasks/{uid}`` until it succeeds, fails or ``task_timeout_s``
passes (the SDK's ``wait_for_task`` default of 5 s with no bound on the overall ingest is replaced by ours).

Index settings applied on ingest: searchable ``title``, ``text``; filterable ``published_ts``, ``domain``,
``doc_id``, ``source_kind``, ``trust``; sortable ``published_ts``. Document ids are
:func:`fabric.writers.chunk_key` (Meilisearch allows only ``[A-Za-z0-9_-]`` ids).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import aiohttp

from fabric.errors import IngestError, LaneError
from fabric.httpclient import fetch
from fabric.writers import chunk_record

__all__ = ["INDEX_SETTINGS", "MeilisearchWriter"]

INDEX_SETTINGS: dict[str, list[str]] = {
    "searchableAttributes": ["title", "text"],
    "filterableAttributes": ["published_ts", "domain", "doc_id", "source_kind", "trust"],
    "sortableAttributes": ["published_ts"],
}
"""Settings applied to the index on ingest."""


class MeilisearchWriter:
    """Upserts chunk documents into one Meilisearch index."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        url: str,
        *,
        index: str = "chunks",
        api_key: str = "",
        timeout_s: float = 10.0,
        task_timeout_s: float = 60.0,
        batch_size: int = 1000,
    ) -> None:
        self.session = session
        self.url = url.rstrip("/")
        self.index = index
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout_s = timeout_s
        self.task_timeout_s = task_timeout_s
        self.batch_size = batch_size
        self._ready = False

    async def _call(self, method: str, path: str, body: Any = None, *, check: bool = True) -> Any:
        try:
            resp = await fetch(
                self.session, method, self.url + path, json_body=body, headers=self.headers,
                timeout_s=self.timeout_s, provider="meilisearch", check_status=check,
            )
            return resp.json(provider="meilisearch") if resp.body else {}
        except LaneError as exc:
            raise IngestError(f"meilisearch {method} {path}: {exc}") from None

    async def wait_task(self, task: Any) -> dict[str, Any]:
        """Poll a task until it finishes, bounded by ``task_timeout_s``.

        Raises:
            IngestError: the task failed, or did not finish in time.
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
            if status == "succeeded":
                return dict(info)
            if status in ("failed", "canceled"):
                return dict(info)
            if loop.time() + delay > deadline:
                raise IngestError(f"meilisearch task {uid} still {status} after {self.task_timeout_s:g} s")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    async def ensure_index(self) -> None:
        """Create the index (primary key ``id``) if needed and apply :data:`INDEX_SETTINGS`."""
        if self._ready:
            return
        created = await self.wait_task(await self._call("POST", "/indexes", {"uid": self.index, "primaryKey": "id"}))
        error = created.get("error") or {}
        if created.get("status") != "succeeded" and error.get("code") != "index_already_exists":
            raise IngestError(f"meilisearch: cannot create index {self.index!r}: {error.get('message')}")
        done = await self.wait_task(await self._call("PATCH", f"/indexes/{self.index}/settings", INDEX_SETTINGS))
        if done.get("status") != "succeeded":
            raise IngestError(f"meilisearch: settings rejected: {(done.get('error') or {}).get('message')}")
        self._ready = True

    async def upsert(self, chunks: Sequence[Any]) -> int:
        """Add or replace the chunks' documents; returns how many were written."""
        await self.ensure_index()
        docs = []
        for chunk in chunks:
            rec = chunk_record(chunk)
            rec["id"] = rec.pop("key")
            docs.append(rec)
        for start in range(0, len(docs), self.batch_size):
            batch = docs[start : start + self.batch_size]
            task = await self._call("POST", f"/indexes/{self.index}/documents?primaryKey=id", batch)
            done = await self.wait_task(task)
            if done.get("status") != "succeeded":
                raise IngestError(f"meilisearch: documents rejected: {(done.get('error') or {}).get('message')}")
        return len(docs)

    async def delete(self, keys: Sequence[str]) -> int:
        """Delete documents by their :func:`~fabric.writers.chunk_key` ids; returns how many were asked."""
        if not keys:
            return 0
        await self.ensure_index()
        task = await self._call("POST", f"/indexes/{self.index}/documents/delete-batch", list(keys))
        done = await self.wait_task(task)
        if done.get("status") != "succeeded":
            raise IngestError(f"meilisearch: delete failed: {(done.get('error') or {}).get('message')}")
        return len(keys)
