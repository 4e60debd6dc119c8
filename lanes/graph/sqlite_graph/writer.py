"""Embedded graph store in SQLite: entities, aliases, relations and provenance edges, plus its store writer.

Tables (``<home>/graph.sqlite`` unless ``options.path``):

- ``entities(id, norm, label)``: one node per normalised entity name;
- ``aliases(alias, canonical)``: the alias table in force when the store was last written (for inspection);
- ``relations(subject_id, predicate, object_id, chunk_id)``: directed ``Entity --predicate--> Entity`` edges, each
  remembering the chunk it was extracted from;
- ``mentions(entity_id, chunk_id)``: provenance edges ``Entity --appears_in--> Chunk``;
- ``chunks``: the chunk payload (same columns as the keyword store), so graph hits carry text and provenance.

Relations are the extractor's (co-occurrence and verb patterns) plus the triples supplied at ingest (the JSONL
``triples`` field). Aliases come from ``options.aliases`` (an inline table) and ``options.aliases_file`` (a TOML
or JSON object ``{alias = canonical}``), read when the store or lane opens, never at import.
"""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from collections.abc import Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from fabric.core.chunks import Chunk, Triple
from fabric.core.logs import get_logger
from lanes._options import LaneOptions
from lanes.base import LaneResources, LaneSpec
from lanes.graph._extract.chunk_graph import chunk_extraction, load_aliases
from lanes.graph._extract.entities import EntityExtractor, Extraction, RuleExtractor
from lanes.graph._extract.pool import PART, ExtractionPool, Part
from lanes.graph._extract.pool import available as pool_available
from lanes.graph.sqlite_graph.sql_process import SqlProcess, SqlProcessFailed
from lanes.graph.sqlite_graph.sql_process import available as sql_available
from lanes.graph.sqlite_graph.tables import (
    BUMP,
    GRAPH_INDEXES,
    GRAPH_TABLES,
    TRIPLES_BY_CHUNK,
    create_indexes,
    graph_path,
    missing_indexes,
    write_batch,
)
from lanes.sqlite_common import SqliteDb, chunk_row

__all__ = [
    "POOL_MIN_BATCH",
    "SqliteGraphWriter",
    "chunk_extraction",
    "load_aliases",
]

log = get_logger(__name__)

POOL_MIN_BATCH = 128
"""Smallest batch whose extraction goes to the worker process (below it, starting the process costs more)."""

AHEAD = 2
"""Prefetched batches kept waiting for their upsert."""


class SqliteGraphWriter:
    """Store writer of the SQLite graph: extracts entities and relations from each chunk.

    Bulk load: an ingest into an empty store (no chunk, no secondary index yet) writes the tables only and builds
    :data:`GRAPH_INDEXES` once at the end: when the ingest's audit first reads :meth:`triples`, else at
    :meth:`finish`, else at :meth:`aclose`. That is cheaper than keeping three B-trees up to date row by row (50K
    passages: entities, mentions and relations in 16.4 s against 10.2 s plus 2.4 s to index). A connection that
    opens the store meanwhile (the lane) creates them itself, and so does this writer before a delete or a
    re-written id: the store is never read without its indexes by a query that needs them.

    Extraction runs in a worker process (:class:`~lanes.graph._extract.pool.ExtractionPool`) for batches of at least
    :data:`POOL_MIN_BATCH` chunks when the writer uses the default extractor and ``options.extract_process`` is not
    false; smaller batches and other extractors run in the writer's thread. The statements of such a batch run in
    a third process (:class:`~lanes.graph.sqlite_graph.sql_process.SqlProcess`, exec'd) unless ``options.sql_process``
    is
    false; if it dies, the writer logs ``graph_sql_process_failed`` and runs them in its thread from then on.
    """

    store = "sqlite_graph"
    needs_vectors = False

    def __init__(self, spec: LaneSpec, resources: LaneResources, extractor: EntityExtractor | None = None) -> None:
        self.spec = spec
        self.db = SqliteDb(graph_path(spec, resources), GRAPH_TABLES)
        self.extractor = extractor
        self._aliases: dict[str, str] = {}
        self._pooled = extractor is None and LaneOptions(spec).flag("extract_process", True) and pool_available()
        self._pool: ExtractionPool | None = None
        self._sql_on = self._pooled and LaneOptions(spec).flag("sql_process", True) and sql_available()
        self._sql: SqlProcess | None = None
        self._deferred = False  # the secondary indexes are built after the bulk load
        self._ahead: dict[tuple[str, ...], list[Part]] = {}  # prefetched batches by their ids, oldest first

    async def open(self) -> None:
        """Create tables, load the alias table and record it in the store; defer the indexes of an empty store."""
        if self.extractor is None:
            self._aliases = load_aliases(self.spec)
            self.extractor = RuleExtractor(self._aliases)

        def init(conn: sqlite3.Connection) -> bool:
            empty = conn.execute("SELECT NOT EXISTS (SELECT 1 FROM chunks)").fetchone()[0]
            deferred = bool(empty) and len(missing_indexes(conn)) == len(GRAPH_INDEXES)
            if not deferred:
                create_indexes(conn)
            with conn:
                conn.execute("DELETE FROM aliases")
                conn.executemany("INSERT OR REPLACE INTO aliases VALUES (?, ?)", list(self._aliases.items()))
            return deferred

        self._deferred = await self.db.run(init)  # opened again later (the audit's read): the indexes are built

    def _extractions(self, chunks: Sequence[Chunk]) -> list[Part] | None:
        """The batch's extractions in flight in the worker process (those :meth:`prefetch` started, if it named
        this batch), or None when they are made in the writer."""
        ahead = self._ahead.pop(tuple(c.id for c in chunks), None)
        return ahead if ahead is not None else self._submit(chunks)

    def _submit(self, chunks: Sequence[Chunk]) -> list[Part] | None:
        if not self._pooled or self.extractor is None or len(chunks) < POOL_MIN_BATCH:
            return None
        if self._pool is None:
            limit = self.extractor.max_entities if isinstance(self.extractor, RuleExtractor) else 64
            self._pool = ExtractionPool(self._aliases, max_entities=limit)  # the worker's extractor is this one
        try:
            return self._pool.submit(chunks)
        except BrokenProcessPool:  # the worker died between two batches
            self._pool_failed()
            return None

    def _sql_process(self) -> SqlProcess | None:
        """The process that runs a pooled batch's SQL (started with the first one), or None: in the thread."""
        if self._sql is None and self._sql_on:
            try:
                self._sql = SqlProcess(self.db.path, GRAPH_TABLES)
            except (OSError, SqlProcessFailed) as exc:  # cannot start (no interpreter, no pipe)
                self._sql_failed(exc)
        return self._sql

    def _sql_failed(self, exc: BaseException) -> None:
        log.warning("graph_sql_process_failed", store=self.store, error=str(exc), fallback="SQL in the writer's thread")
        self._sql_on = False
        sql, self._sql = self._sql, None
        if sql is not None:
            sql.close()

    def _pool_failed(self) -> None:
        log.warning("graph_extract_process_failed", store=self.store, fallback="extracting in the writer's thread")
        self._pooled = False

    def prefetch(self, chunks: Sequence[Chunk]) -> None:
        """Start extracting a batch a later :meth:`upsert` writes (the ingest names the next batch just before it
        writes the current one), so that the worker process extracts it while this writer stores the current one
        (:class:`~fabric.core.chunks.PrefetchingStore`). At most :data:`AHEAD` batches wait: an older one that
        no upsert took is dropped."""
        key = tuple(c.id for c in chunks)
        if not key or key in self._ahead:
            return
        while len(self._ahead) >= AHEAD:
            for pending in self._ahead.pop(next(iter(self._ahead))):
                pending.cancel()
        parts = self._submit(chunks)
        if parts is not None:
            self._ahead[key] = parts

    async def upsert(self, chunks: Sequence[Chunk]) -> None:
        """Replace the chunks' payload, entities, relations and provenance edges."""
        if self.extractor is None:
            await self.open()
        extractor = self.extractor
        assert extractor is not None
        parts = self._extractions(chunks)

        def extracted() -> Iterator[list[tuple[str, Extraction]]]:
            if parts is None:
                yield [(c.id, chunk_extraction(c, extractor, self._aliases)) for c in chunks]
                return
            for i, pending in enumerate(parts):
                try:
                    part = pending.result()
                except BrokenProcessPool:  # the worker died (killed, out of memory): extract here instead
                    self._pool_failed()
                    done = i * PART
                    yield [(c.id, chunk_extraction(c, extractor, self._aliases)) for c in chunks[done:]]
                    return
                yield list(zip((c.id for c in chunks[i * PART : (i + 1) * PART]), part, strict=True))

        rows = [chunk_row(c) for c in chunks]
        deferred = self._deferred
        sql = self._sql_process() if parts is not None else None

        def write() -> bool:
            todo = extracted()
            if sql is None:
                return self.db.call(lambda conn: write_batch(conn, rows, todo, deferred))
            sent: list[Sequence[tuple[str, Extraction]]] = []  # what the process got, kept for the fallback
            try:
                return sql.write(rows, deferred, todo, sent)
            except SqlProcessFailed as exc:  # it died: its transaction is gone, or committed (rows are upserts)
                self._sql_failed(exc)
                return self.db.call(lambda conn: write_batch(conn, rows, itertools.chain(sent, todo), deferred))

        try:
            self._deferred = await asyncio.to_thread(write)
        finally:
            for pending in parts or ():
                pending.cancel()

    def _end_bulk(self, conn: sqlite3.Connection) -> None:
        if self._deferred:
            create_indexes(conn)
            self._deferred = False

    async def finish(self) -> dict[str, Any]:
        """Build the secondary indexes a bulk load deferred; stop the extraction process."""
        await self._close_pool()
        if not self._deferred:
            return {"indexed": False}
        await self.db.run(self._end_bulk)
        return {"indexed": True}

    async def _close_pool(self) -> None:
        """Stop the SQL process (after the batch in flight) and the extraction process, in a worker thread that
        a cancellation does not stop: cancelled before it started, a plain ``to_thread`` would never run, and
        the processes would outlive the writer."""
        sql, self._sql = self._sql, None
        pool, self._pool, self._ahead = self._pool, None, {}

        def close() -> None:
            try:
                if sql is not None:
                    sql.close()
            finally:
                if pool is not None:
                    pool.close()

        if sql is not None or pool is not None:
            await asyncio.shield(asyncio.to_thread(close))

    async def delete(self, ids: Sequence[str]) -> None:
        """Delete chunks with their edges, then entities no chunk mentions any more."""

        def write(conn: sqlite3.Connection) -> None:
            self._end_bulk(conn)
            rows = [(i,) for i in ids]
            with conn:
                conn.executemany("DELETE FROM mentions WHERE chunk_id = ?", rows)
                conn.executemany("DELETE FROM relations WHERE chunk_id = ?", rows)
                conn.executemany("DELETE FROM chunks WHERE id = ?", rows)
                conn.execute("DELETE FROM entities WHERE id NOT IN (SELECT entity_id FROM mentions)")
                conn.execute(BUMP)

        if ids:
            await self.db.run(write)

    async def triples(self, ids: Sequence[str]) -> dict[str, set[Triple]]:
        """The relations stored for each chunk id, by entity label (for the audit history)."""

        def read(conn: sqlite3.Connection) -> dict[str, set[Triple]]:
            self._end_bulk(conn)  # read by chunk id: the load is over (the audit reads after writing), index it
            out: dict[str, set[Triple]] = {}
            for i in range(0, len(ids), 500):
                part = list(ids[i : i + 500])
                sql = TRIPLES_BY_CHUNK.format(marks=",".join("?" * len(part)))
                for chunk_id, subj, pred, obj in conn.execute(sql, part):
                    out.setdefault(chunk_id, set()).add((subj, pred, obj))
            return out

        return await self.db.run(read) if ids else {}

    async def ids(self) -> set[str]:
        """Every chunk id the store holds (``fabric check``)."""
        return await self.db.run(lambda conn: {r[0] for r in conn.execute("SELECT id FROM chunks")})

    async def aclose(self) -> None:
        """Build deferred indexes (a caller that did not :meth:`finish`), stop the extraction process, close the
        connections."""
        try:
            await self.finish()
        finally:
            await self.db.aclose()
