"""The exact (flat) vector store on disk, and its store writer (backend ``numpy_flat``).

One SQLite file per embedding model, ``<home>/vectors/<model slug>.sqlite`` (``options.path`` overrides it), holds
a row per chunk: the float32 vector, the filter columns (a bitset of the years it mentions, its trust, its
domain) and the payload a hit is made of (JSON). SQLite gives what the store must guarantee without code of its
own: a write is one transaction (a crash leaves the previous state, never a torn file), WAL lets a reader process
search while the CLI ingests, re-ingesting a chunk replaces its row (idempotent) and a deleted id goes away.

Readers (:mod:`lanes.vector.numpy_flat.index`) keep the vectors in a numpy matrix and follow the writes incrementally:
every write transaction bumps ``meta.gen`` and stamps its rows (``vec.seq``) and deletions (``tomb.seq``) with
it, so a reader loads only what changed since the generation it holds.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from fabric.core.chunks import Chunk
from fabric.core.errors import IngestError
from lanes.base import LaneResources, LaneSpec
from lanes.vector._payload import chunk_payload
from lanes.vector.numpy_flat.ann import ann_config
from lanes.vector.numpy_flat.store import (
    TRUST_CODES,
    connect,
    store_path,
    year_bits,
)

__all__ = [
    "FlatVectorWriter",
]


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
        or stale (:func:`~lanes.vector.numpy_flat.index.build_for_store`), so the first searches need no scan."""
        from lanes.vector.numpy_flat.index import build_for_store

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
