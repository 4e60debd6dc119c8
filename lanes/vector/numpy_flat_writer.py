"""The exact (flat) vector store on disk, and its store writer (backend ``numpy_flat``).

One SQLite file per embedding model, ``<home>/vectors/<model slug>.sqlite`` (``options.path`` overrides it), holds
a row per chunk: the float32 vector, the filter columns (a bitset of the years it mentions, its trust, its
domain) and the payload a hit is made of (JSON). SQLite gives what the store must guarantee without code of its
own: a write is one transaction (a crash leaves the previous state, never a torn file), WAL lets a reader process
search while the CLI ingests, re-ingesting a chunk replaces its row (idempotent) and a deleted id goes away.

Readers (:mod:`lanes.vector.numpy_flat_index`) keep the vectors in a numpy matrix and follow the writes incrementally:
every write transaction bumps ``meta.gen`` and stamps its rows (``vec.seq``) and deletions (``tomb.seq``) with
it, so a reader loads only what changed since the generation it holds.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fabric import tenants
from fabric.errors import IngestError
from fabric.models import Trust
from fabric.writers.model import Chunk
from lanes.base import LaneResources, LaneSpec
from lanes.sqlite_common import MMAP_BYTES
from lanes.vector.ann import ann_config
from lanes.vector.payload import chunk_payload

__all__ = [
    "TRUST_CODES",
    "YEAR_MAX",
    "YEAR_MIN",
    "YEAR_WORDS",
    "FlatVectorWriter",
    "connect",
    "store_path",
    "year_bits",
    "year_range_bits",
]

YEAR_MIN = 1800
YEAR_MAX = 2111
"""Years outside ``[YEAR_MIN, YEAR_MAX]`` are not indexed (the year extractor finds 1800–2100 only)."""
YEAR_WORDS = (YEAR_MAX - YEAR_MIN + 64) // 64
"""``uint64`` words of a year bitset."""

TRUST_CODES: dict[str, int] = {t.value: i for i, t in enumerate(Trust)}
"""Trust value → the small integer stored in ``vec.trust``."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS vec (
    id TEXT PRIMARY KEY, seq INTEGER NOT NULL, v BLOB NOT NULL, years BLOB NOT NULL,
    trust INTEGER NOT NULL, domain TEXT NOT NULL, payload TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS vec_seq ON vec(seq);
CREATE TABLE IF NOT EXISTS tomb (id TEXT PRIMARY KEY, seq INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS tomb_seq ON tomb(seq);
"""


def store_path(spec: LaneSpec, resources: LaneResources, model: str) -> Path:
    """``options.path`` or ``<home>/vectors/<model slug>.sqlite`` (one file per embedding model; per tenant:
    :func:`fabric.tenants.store_path`)."""
    slug = re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_") or "model"
    return tenants.store_path(spec.options.get("path"), resources.home / "vectors" / f"{slug}.sqlite", resources.tenant)


def connect(path: Path) -> sqlite3.Connection:
    """A connection in WAL mode with the schema created (the caller serialises its use)."""
    conn = sqlite3.connect(path, timeout=60.0, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")  # payload reads through the map (lanes.sqlite_common)
    conn.executescript(_SCHEMA)
    return conn


def year_bits(years: Iterable[int]) -> np.ndarray:
    """The bitset (``uint64`` words) of the indexable ``years``."""
    bits = np.zeros(YEAR_WORDS, dtype=np.uint64)
    for y in years:
        if YEAR_MIN <= y <= YEAR_MAX:
            off = y - YEAR_MIN
            bits[off // 64] |= np.uint64(1 << (off % 64))
    return bits


def year_range_bits(lo: int | None, hi: int | None) -> np.ndarray:
    """The bitset of every indexable year in ``[lo, hi]`` (None: unbounded on that side)."""
    start, end = max(lo if lo is not None else YEAR_MIN, YEAR_MIN), min(hi if hi is not None else YEAR_MAX, YEAR_MAX)
    return year_bits(range(start, end + 1))


def _row(chunk: Chunk, seq: int) -> tuple[Any, ...]:
    vec = np.asarray(chunk.vector, dtype=np.float32)
    return (
        chunk.id, seq, vec.tobytes(), year_bits(chunk.years).tobytes(), TRUST_CODES[chunk.trust.value],
        chunk.domain.lower(), json.dumps(chunk_payload(chunk), separators=(",", ":")),
    )  # fmt: skip


class FlatVectorWriter:
    """Store writer of the flat vector store (needs vectors); every call is one SQLite transaction."""

    store = "numpy_flat"
    needs_vectors = True

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        self.model = resources.embedder.name if resources.embedder else "none"
        self.path = store_path(spec, resources, self.model)
        self.ann = ann_config(spec)
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _open(self) -> sqlite3.Connection:
        with self._lock:
            if self._conn is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._conn = connect(self.path)
            return self._conn

    async def open(self) -> None:
        """Create the file and its tables if missing; idempotent."""
        await asyncio.to_thread(self._open)

    def _transaction(self, write: Any) -> None:
        conn = self._open()
        with self._lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute("SELECT value FROM meta WHERE key = 'gen'").fetchone()
                seq = (row[0] if row else 0) + 1
                write(conn, seq)
                conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('gen', ?)", (seq,))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def _upsert(self, chunks: Sequence[Chunk]) -> None:
        dims = {len(c.vector) for c in chunks if c.vector is not None}

        def write(conn: sqlite3.Connection, seq: int) -> None:
            row = conn.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()
            known = {row[0]} if row else set()
            if len(dims | known) > 1:
                raise IngestError(f"vector store {self.path}: dimensions {sorted(dims | known)} cannot be mixed")
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('dim', ?)", (next(iter(dims)),))
            rows = [_row(c, seq) for c in chunks if c.vector is not None]
            conn.executemany("INSERT OR REPLACE INTO vec VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            conn.executemany("DELETE FROM tomb WHERE id = ?", [(r[0],) for r in rows])

        if dims:
            self._transaction(write)

    async def upsert(self, chunks: Sequence[Chunk]) -> None:
        """Insert or replace the chunks that carry a vector (others are skipped).

        Raises:
            IngestError: the vectors' dimension differs from the store's.
        """
        await asyncio.to_thread(self._upsert, list(chunks))

    def _delete(self, ids: Sequence[str]) -> None:
        def write(conn: sqlite3.Connection, seq: int) -> None:
            conn.executemany("DELETE FROM vec WHERE id = ?", [(i,) for i in ids])
            conn.executemany("INSERT OR REPLACE INTO tomb (id, seq) VALUES (?, ?)", [(i, seq) for i in ids])

        if ids:
            self._transaction(write)

    async def delete(self, ids: Sequence[str]) -> None:
        """Delete the rows of ``ids`` (unknown ids are ignored)."""
        await asyncio.to_thread(self._delete, list(dict.fromkeys(ids)))

    async def finish(self) -> dict[str, Any]:
        """After an ingest: build and save the store's HNSW graph if it is large enough and the saved one is missing
        or stale (:func:`~lanes.vector.numpy_flat_index.build_for_store`), so the first searches need no scan."""
        from lanes.vector.numpy_flat_index import build_for_store

        if not self.path.is_file():
            return {"rows": 0, "built": False}
        return await asyncio.to_thread(build_for_store, self.path, self.ann)

    def _ids(self) -> set[str]:
        conn = self._open()
        with self._lock:
            return {r[0] for r in conn.execute("SELECT id FROM vec")}

    async def ids(self) -> set[str]:
        """Every chunk id the store holds (``fabric check``)."""
        return await asyncio.to_thread(self._ids)

    async def aclose(self) -> None:
        """Close the connection."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
