"""Qdrant plumbing shared by the vector lane and its store writer: clients, collections, points, payloads.

Local mode (the default) keeps the collection on disk under ``<home>/qdrant`` (``options.path``); a server is used
when ``options.url`` is set (``options.api_key`` optional) — same code either way.

Qdrant local mode takes an exclusive lock on its folder, so a process may hold one client per path. Local
clients therefore come from a process-wide, reference-counted cache keyed by the resolved path
(:func:`acquire_client` / :func:`release_client`): ingestion and the lane in one process share the client, and the
folder is unlocked when the last user releases it. Server clients are not shared (they are cheap and belong to
their owner's event loop).

Point ids are UUIDv5 of ``(doc_id, chunk_id, embedding model)``: re-ingesting the same chunk overwrites its point,
and a new model writes new points (in its own collection ``chunks_<model>``).
"""

from __future__ import annotations

import fcntl
import re
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabric.core.chunks import Chunk
from fabric.core.errors import LaneError, LaneRejected, LaneUnavailable
from fabric.core.tenants import DEFAULT_TENANT, scoped_name, store_path
from lanes.base import LaneResources, LaneSpec
from lanes.vector._payload import chunk_payload

if TYPE_CHECKING:
    from qdrant_client import AsyncQdrantClient

__all__ = [
    "QdrantWriter",
    "acquire_client",
    "collection_name",
    "map_qdrant_error",
    "point_id",
    "release_client",
]

_NAMESPACE = uuid.UUID("6f1c1d52-5f0e-4b7c-9a53-4d4cfa7e0b11")
_MAX_COLLECTION = 255
"""Longest collection name Qdrant accepts."""
_LOCAL: dict[str, tuple[AsyncQdrantClient, int]] = {}


def point_id(doc_id: str, chunk_id: str, model: str) -> str:
    """Deterministic point id: UUIDv5 of doc id, chunk id and embedding model."""
    return str(uuid.uuid5(_NAMESPACE, f"{doc_id}\x00{chunk_id}\x00{model}"))


def collection_name(spec: LaneSpec, model: str, tenant: str = DEFAULT_TENANT) -> str:
    """``options.collection`` or ``chunks_<model slug>``; ``<that>__<tenant>`` for a tenant other than ``default``
    (one collection per tenant, :func:`fabric.core.tenants.scoped_name`)."""
    opt = spec.options.get("collection")
    base = str(opt) if opt else "chunks_" + re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_")
    return scoped_name(base, tenant, limit=_MAX_COLLECTION)


def _key(spec: LaneSpec, resources: LaneResources) -> tuple[str, dict[str, Any]]:
    url = str(spec.options.get("url") or "")
    if url:
        api_key = str(spec.options.get("api_key") or "") or None
        # no background version probe: it runs in a thread outside the lane's budget and error mapping
        return f"url:{url}", {"url": url, "api_key": api_key, "check_compatibility": False}
    path = store_path(spec.options.get("path"), resources.home / "qdrant", resources.tenant).resolve()
    return f"path:{path}", {"path": str(path), "force_disable_check_same_thread": True}


def acquire_client(spec: LaneSpec, resources: LaneResources) -> tuple[str, AsyncQdrantClient]:
    """A client for the lane's Qdrant (shared per path in local mode); pair with :func:`release_client`.

    Raises:
        LaneUnavailable: the local folder is locked by another process, or the client cannot be built.
    """
    from qdrant_client import AsyncQdrantClient  # deferred: the SDK takes seconds to import

    key, kwargs = _key(spec, resources)
    if key.startswith("url:"):
        return key, AsyncQdrantClient(**kwargs)
    if key in _LOCAL:
        client, count = _LOCAL[key]
        _LOCAL[key] = (client, count + 1)
        return key, client
    Path(kwargs["path"]).mkdir(parents=True, exist_ok=True)
    _probe_lock(Path(kwargs["path"]))
    try:
        client = AsyncQdrantClient(**kwargs)
    except (RuntimeError, OSError) as exc:
        raise LaneUnavailable(f"qdrant local store unavailable: {exc}", provider="qdrant") from exc
    _LOCAL[key] = (client, 1)
    return key, client


def _probe_lock(folder: Path) -> None:
    """Refuse a local folder another process holds before building a client on it: qdrant-client takes the
    same ``flock`` on ``<folder>/.lock``, and when it fails it leaks that file (an "Exception ignored" traceback
    on stderr when it is collected).

    Raises:
        LaneUnavailable: the folder is locked.
    """
    lock = folder / ".lock"
    try:
        with lock.open("a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fh, fcntl.LOCK_UN)
    except BlockingIOError:
        msg = f"qdrant local store unavailable: {folder} is held by another process (a running service?)"
        raise LaneUnavailable(msg, provider="qdrant") from None
    except OSError as exc:
        raise LaneUnavailable(f"qdrant local store unavailable: {exc}", provider="qdrant") from None


async def release_client(key: str, client: AsyncQdrantClient) -> None:
    """Release a client from :func:`acquire_client`; the last release of a local client closes it."""
    if key.startswith("url:"):
        await client.close()
        return
    shared, count = _LOCAL.get(key, (client, 1))
    if count > 1:
        _LOCAL[key] = (shared, count - 1)
        return
    _LOCAL.pop(key, None)
    await client.close()


def map_qdrant_error(exc: Exception) -> LaneError:
    """Map a qdrant-client / transport exception onto the fabric's lane errors (most specific first)."""
    from qdrant_client.common.client_exceptions import ResourceExhaustedResponse
    from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

    if isinstance(exc, LaneError):
        return exc
    if isinstance(exc, ResourceExhaustedResponse):  # 429 with Retry-After: suspend the provider that long
        return LaneRejected("qdrant rate limited: HTTP 429", provider="qdrant", suspend_s=float(exc.retry_after_s))
    if isinstance(exc, UnexpectedResponse):
        code = exc.status_code or 0
        if code in (401, 403):
            return LaneRejected(f"qdrant refused: HTTP {code}", provider="qdrant", failure="forbidden")
        if code == 429:
            return LaneRejected("qdrant rate limited: HTTP 429", provider="qdrant")
        if code >= 500:
            return LaneUnavailable(f"qdrant failed: HTTP {code}", provider="qdrant")
        from fabric.core.errors import LaneBadResponse

        return LaneBadResponse(f"qdrant answered HTTP {code}: {exc}", provider="qdrant")
    if isinstance(exc, ResponseHandlingException | ConnectionError | OSError | RuntimeError | TimeoutError):
        return LaneUnavailable(f"qdrant unavailable: {exc}", provider="qdrant")
    from fabric.core.errors import LaneBadResponse

    return LaneBadResponse(f"qdrant error: {exc!r}", provider="qdrant")


class QdrantWriter:
    """Store writer of the Qdrant vector store (needs vectors)."""

    store = "qdrant"
    needs_vectors = True

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        self.spec = spec
        self.resources = resources
        self.model = resources.embedder.name if resources.embedder else "none"
        self.collection = collection_name(spec, self.model, resources.tenant)
        self._client: tuple[str, AsyncQdrantClient] | None = None

    async def open(self) -> None:
        """Acquire the (shared) client."""
        if self._client is None:
            self._client = acquire_client(self.spec, self.resources)

    async def _ensure(self, dim: int) -> AsyncQdrantClient:
        from qdrant_client import models  # deferred: the SDK takes seconds to import

        await self.open()
        assert self._client is not None
        client = self._client[1]
        if not await client.collection_exists(self.collection):
            await client.create_collection(
                self.collection, vectors_config=models.VectorParams(size=dim, distance=models.Distance.COSINE)
            )
            if self._client[0].startswith("url:"):  # payload indexes only matter (and only exist) on a server
                for field, schema in (
                    ("years", models.PayloadSchemaType.INTEGER),
                    ("published_ts", models.PayloadSchemaType.FLOAT),
                    ("trust", models.PayloadSchemaType.KEYWORD),
                    ("id", models.PayloadSchemaType.KEYWORD),
                ):
                    await client.create_payload_index(self.collection, field, field_schema=schema)
        return client

    async def upsert(self, chunks: Sequence[Chunk]) -> None:
        """Upsert the chunks that carry a vector (others are skipped)."""
        from qdrant_client import models  # deferred: the SDK takes seconds to import

        points = [
            models.PointStruct(
                id=point_id(c.doc_id, c.chunk_id, self.model), vector=list(c.vector), payload=chunk_payload(c)
            )
            for c in chunks
            if c.vector is not None
        ]
        if not points:
            return
        try:
            client = await self._ensure(len(points[0].vector))  # type: ignore[arg-type]
            await client.upsert(self.collection, points=points, wait=True)
        except Exception as exc:  # SDK/transport errors become typed lane errors
            raise map_qdrant_error(exc) from exc

    async def delete(self, ids: Sequence[str]) -> None:
        """Delete points whose payload ``id`` is in ``ids``."""
        from qdrant_client import models  # deferred: the SDK takes seconds to import

        if not ids:
            return
        await self.open()
        assert self._client is not None
        client = self._client[1]
        try:
            if not await client.collection_exists(self.collection):
                return
            selector = models.FilterSelector(
                filter=models.Filter(must=[models.FieldCondition(key="id", match=models.MatchAny(any=list(ids)))])
            )
            await client.delete(self.collection, points_selector=selector, wait=True)
        except Exception as exc:  # SDK/transport errors become typed lane errors
            raise map_qdrant_error(exc) from exc

    async def ids(self) -> set[str]:
        """Every chunk id (payload ``id``) of the collection, scrolled in pages (``fabric check``)."""
        await self.open()
        assert self._client is not None
        client = self._client[1]
        found: set[str] = set()
        try:
            if not await client.collection_exists(self.collection):
                return found
            offset: Any = None
            while True:
                points, offset = await client.scroll(
                    self.collection, limit=1024, offset=offset, with_payload=["id"], with_vectors=False
                )
                found.update(str(p.payload["id"]) for p in points if p.payload and "id" in p.payload)
                if offset is None:
                    return found
        except Exception as exc:  # SDK/transport errors become typed lane errors
            raise map_qdrant_error(exc) from exc

    async def aclose(self) -> None:
        """Release the client."""
        if self._client is not None:
            key, client = self._client
            self._client = None
            await release_client(key, client)
