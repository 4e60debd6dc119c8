"""The LanceDB vector store's writer (backend ``lancedb``): idempotent upserts by chunk id, deletes, the ANN index.

Layout and options: :mod:`lanes.vector.lancedb.store`. Every call runs LanceDB's blocking client in a thread, one
at a time (a lock), and each write is one LanceDB commit: a new table version, so a reader never sees half a batch.

- **Upsert** is a ``merge_insert`` on ``id``: a chunk written again replaces its row, a new one is added.
- **Delete** removes the rows of the ids (``id IN (...)``); unknown ids are ignored.
- **Finish** (after an ingest, the ``index`` stage): compacts the batches' small fragments and, once the table holds
  ``index_min_rows`` rows, builds the ANN index on ``vector`` (``index_type``, cosine) and the scalar indexes of
  the filter columns (years: label list, trust: bitmap, domain: B-tree). Rows written after the index are merged
  into it by the next ``finish``; until then the lane searches them exactly beside the index.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

from fabric.core.chunks import Chunk
from fabric.core.errors import IngestError, LaneError
from lanes.base import LaneResources, LaneSpec
from lanes.vector.lancedb.store import (
    PROVIDER,
    LanceOptions,
    chunk_rows,
    connect,
    map_lance_error,
    open_table,
    quote,
    schema,
    table_dim,
    table_name,
)

__all__ = ["LanceWriter"]

_DELETE_BATCH = 500
"""Ids per delete predicate."""


class LanceWriter:
    """Store writer of the LanceDB vector store (needs vectors)."""

    store = PROVIDER
    needs_vectors = True

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        self.opts = LanceOptions.parse(spec)
        self.model = resources.embedder.name if resources.embedder else "none"
        self.folder = self.opts.folder(resources)
        self.name = table_name(self.model)
        self._db: Any = None
        self._table: Any = None
        self._lock = threading.Lock()

    def _connect(self) -> Any:
        if self._db is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._db = connect(self.folder)
        return self._db

    def _table_of(self, dim: int | None) -> Any:
        """The model's table; created for ``dim``-dimensional vectors when missing and ``dim`` is given."""
        if self._table is None:
            db = self._connect()
            self._table = open_table(db, self.folder, self.name)
            if self._table is None and dim is not None:
                self._table = db.create_table(self.name, schema=schema(dim))
        return self._table

    def _run(self, work: Any) -> Any:
        """``work()`` under the lock, LanceDB's failures as lane errors (an :class:`IngestError` passes)."""
        with self._lock:
            try:
                return work()
            except (IngestError, LaneError):
                raise
            except Exception as exc:
                raise map_lance_error(exc) from exc

    async def open(self) -> None:
        """Create the database folder and connect; idempotent."""
        await asyncio.to_thread(self._run, self._connect)

    def _upsert(self, chunks: Sequence[Chunk]) -> None:
        dims = {len(c.vector) for c in chunks if c.vector is not None}
        if not dims:
            return
        table = self._table_of(next(iter(dims)))
        known = table_dim(table)
        if dims != {known}:
            raise IngestError(
                f"vector store {self.folder / self.name}: dimensions {sorted(dims | {known})} cannot be mixed"
            )
        rows = chunk_rows([c for c in chunks if c.vector is not None], known)
        table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(rows)

    async def upsert(self, chunks: Sequence[Chunk]) -> None:
        """Insert or replace the chunks that carry a vector (others are skipped).

        Raises:
            IngestError: the vectors' dimension differs from the table's.
            LaneError: LanceDB failed.
        """
        batch = list(chunks)
        await asyncio.to_thread(self._run, lambda: self._upsert(batch))

    def _delete(self, ids: Sequence[str]) -> None:
        table = self._table_of(None)
        if table is None:
            return
        for start in range(0, len(ids), _DELETE_BATCH):
            part = ids[start : start + _DELETE_BATCH]
            table.delete(f"id IN ({', '.join(quote(i) for i in part)})")

    async def delete(self, ids: Sequence[str]) -> None:
        """Delete the rows of ``ids`` (unknown ids are ignored)."""
        unique = list(dict.fromkeys(ids))
        if unique:
            await asyncio.to_thread(self._run, lambda: self._delete(unique))

    def _finish(self) -> dict[str, Any]:
        table = self._table_of(None)
        if table is None:
            return {"rows": 0, "built": False}
        rows = int(table.count_rows())
        indexed = any(ix.columns == ["vector"] for ix in table.list_indices())
        if not indexed and rows >= self.opts.index_min_rows:
            table.optimize()  # one fragment per batch written: compact them before training the index
            self._build_indexes(table)
            return {"rows": rows, "built": True, "index": self.opts.index_type}
        table.optimize()  # compacts; merges rows written since into the existing indexes
        return {"rows": rows, "built": False, "indexed": indexed}

    def _build_indexes(self, table: Any) -> None:
        from lancedb.index import Bitmap, BTree, IvfHnswSq, IvfPq, LabelList

        config = IvfPq if self.opts.index_type == "IVF_PQ" else IvfHnswSq
        table.create_index("vector", config=config(distance_type="cosine"))
        table.create_index("years", config=LabelList())
        table.create_index("trust", config=Bitmap())
        table.create_index("domain", config=BTree())

    async def finish(self) -> dict[str, Any]:
        """After an ingest: compact, and build the ANN index once the table is large enough (module docstring)."""
        result: dict[str, Any] = await asyncio.to_thread(self._run, self._finish)
        return result

    def _ids(self) -> set[str]:
        table = self._table_of(None)
        if table is None:
            return set()
        rows = table.search().select(["id"]).limit(max(int(table.count_rows()), 1)).to_arrow()
        return {str(x) for x in rows["id"].to_pylist()}

    async def ids(self) -> set[str]:
        """Every chunk id the table holds (``fabric check``)."""
        found: set[str] = await asyncio.to_thread(self._run, self._ids)
        return found

    async def aclose(self) -> None:
        """Drop the table and the connection (LanceDB holds no lock or open transaction between calls)."""
        with self._lock:
            self._table = None
            self._db = None
