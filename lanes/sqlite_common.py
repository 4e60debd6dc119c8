"""Shared plumbing of the embedded SQLite stores (FTS5 keyword, graph): connections, chunk rows, filters.

- :class:`SqliteDb` keeps one connection per thread (WAL mode) and runs blocking calls off the event loop with
  :func:`asyncio.to_thread`; every connection is closed by :meth:`SqliteDb.close`.
- Both stores keep a ``chunks`` table with the same payload columns, so a hit carries its provenance, dates,
  quality and dedup features (SimHash, URL key, title key, computed at ingest) whichever store found it. A
  store created before the feature columns existed gains them when it is opened (empty until re-ingested), and
  one whose SimHash column held signed integers is migrated to the hex text every store uses.
- :func:`filter_sql` turns :class:`~fabric.core.models.BoundConstraints` (date range, ``site:`` domains) plus an
  optional trust filter into a SQL condition on that table; :func:`date_bounds` gives its date range's numbers,
  which the keyword lane's in-memory index applies as a mask too.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Callable, Sequence, Sized
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from fabric.core.chunks import Chunk, from_stored_simhash, to_stored_simhash
from fabric.core.models import BoundConstraints, Hit, SourceKind, Trust

__all__ = [
    "CHUNKS_DDL",
    "CHUNK_COLUMNS",
    "MMAP_BYTES",
    "N_CHUNK_COLUMNS",
    "DateBounds",
    "SqliteDb",
    "chunk_row",
    "date_bounds",
    "deep_fill",
    "filter_sql",
    "non_increasing",
    "placeholders",
    "query_years_span",
    "query_years_sql",
    "row_hit",
    "sites_sql",
]

T = TypeVar("T")

CHUNK_COLUMNS = (
    "id, doc_id, chunk_id, title, text, url, domain, published_at, years, source_kind, source_ref, trust, "
    "quality, metadata, simhash, url_key, title_key"
)
"""Payload columns of every ``chunks`` table, in :func:`chunk_row` order."""
N_CHUNK_COLUMNS = len(CHUNK_COLUMNS.split(","))
"""How many: a query's extra columns (a score) come after them."""

CHUNKS_DDL = """
CREATE TABLE IF NOT EXISTS chunks (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    doc_id TEXT NOT NULL,
    chunk_id TEXT NOT NULL,
    title TEXT NOT NULL,
    text TEXT NOT NULL,
    url TEXT NOT NULL,
    domain TEXT NOT NULL,
    published_at REAL,
    years TEXT NOT NULL,
    source_kind TEXT NOT NULL,
    source_ref TEXT NOT NULL,
    trust TEXT NOT NULL,
    quality REAL,
    metadata TEXT NOT NULL,
    simhash TEXT,
    url_key TEXT,
    title_key TEXT
);
"""

_ADDED_COLUMNS = (("simhash", "TEXT"), ("url_key", "TEXT"), ("title_key", "TEXT"))
"""Columns added to ``chunks`` after the first release: a store created before them gains them (NULL, so its
hits carry no stored features and fusion computes them) until the next ``fabric ingest`` rewrites every chunk
(the features are part of the content hash)."""


def placeholders(values: Sized) -> str:
    """``?,?,...``: one SQL parameter mark per value (an ``IN (...)`` list)."""
    return ",".join("?" * len(values))


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    have = {row[1]: row[2].upper() for row in conn.execute("PRAGMA table_info(chunks)")}
    with conn:
        for name, kind in _ADDED_COLUMNS:
            if name not in have:
                conn.execute(f"ALTER TABLE chunks ADD COLUMN {name} {kind}")
    if have.get("simhash") == "INTEGER":
        _migrate_simhash(conn)


def _migrate_simhash(conn: sqlite3.Connection) -> None:
    """Turn a home's former ``simhash INTEGER`` column (signed 64-bit integers) into the ``TEXT`` column of 16 hex
    digits every store now uses (:func:`~fabric.core.chunks.to_stored_simhash`).

    The column cannot just take text: ``INTEGER`` affinity turns hex digits that read as a number into one
    (``'00000000000012e5'`` → 1200000). ``printf('%016x')`` writes a negative integer as its 64-bit two's
    complement, which is the unsigned signature. One write transaction, the column type checked again inside it
    (another connection may have migrated first), so a crash leaves the old column or the new one, never half.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        kinds = {row[1]: row[2].upper() for row in conn.execute("PRAGMA table_info(chunks)")}
        if kinds.get("simhash") == "INTEGER":
            conn.execute("ALTER TABLE chunks RENAME COLUMN simhash TO simhash_signed")
            conn.execute("ALTER TABLE chunks ADD COLUMN simhash TEXT")
            conn.execute(
                "UPDATE chunks SET simhash = printf('%016x', simhash_signed) WHERE typeof(simhash_signed) = 'integer'"
            )
            conn.execute("ALTER TABLE chunks DROP COLUMN simhash_signed")
        conn.commit()
    except BaseException:
        conn.rollback()
        raise


MMAP_BYTES = 1 << 30
"""``PRAGMA mmap_size`` of the embedded stores' connections: SQLite reads pages through a memory map instead of a
``pread`` and a copy into its 2 MB page cache each. A search reads ~50 random rows' payloads (text, metadata); at
50K passages they are scattered over a 47 MB (keyword) and a 286 MB (vectors) file, so nearly every page missed
the cache: 50 rows took 350 µs (keyword) and 200-260 µs (vectors) of CPU through ``pread``, 190 and 122 µs mapped
(2026-11-29). The mapped pages are the OS's file cache, which ``pread`` filled too, one copy shared by every
process that maps them; but a process's RSS counts the pages it touched: ``fabric serve`` on the 50K home reads
RSS 1.45-1.56 GB instead of 0.73-0.74 GB (its refresh reads the whole vector file), for the same memory in use."""


class SqliteDb:
    """One SQLite file, one connection per thread, blocking work run in worker threads.

    :meth:`close` waits for the calls in flight: a caller cancelled while its call ran (a search past its budget,
    an ingest stopped at shutdown) leaves the thread working on its connection, and closing a connection under
    a running statement crashes the interpreter (SQLite's C API is then handed a freed handle).
    """

    def __init__(self, path: Path, schema: str) -> None:
        self.path = path
        self.schema = schema
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._idle = threading.Condition()
        self._busy = 0
        """Calls in flight (guarded by ``_idle``)."""

    def conn(self) -> sqlite3.Connection:
        """This thread's connection (created, with the schema applied, on first use)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
            conn.executescript(self.schema)
            _add_missing_columns(conn)
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` in a worker thread with that thread's connection."""
        return await asyncio.to_thread(self.call, fn)

    def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(conn)`` in the calling thread with its connection, counted in flight (:meth:`close` waits)."""
        with self._idle:
            self._busy += 1
        try:
            return fn(self.conn())
        finally:
            with self._idle:
                self._busy -= 1
                if not self._busy:
                    self._idle.notify_all()

    def close(self) -> None:
        """Wait for the calls in flight, then close every connection this object opened (a later call opens
        new ones)."""
        with self._idle:
            self._idle.wait_for(lambda: not self._busy)
            with self._lock:
                conns, self._all = self._all, []
            self._local = threading.local()
            for conn in conns:
                conn.close()

    async def aclose(self) -> None:
        """:meth:`close` in a worker thread (waiting for a call in flight never holds the event loop)."""
        await asyncio.to_thread(self.close)


def chunk_row(chunk: Chunk) -> tuple[Any, ...]:
    """The ``chunks`` row of ``chunk`` in :data:`CHUNK_COLUMNS` order."""
    ts = chunk.published_at.timestamp() if chunk.published_at else None
    return (
        chunk.id,
        chunk.doc_id,
        chunk.chunk_id,
        chunk.title,
        chunk.text,
        chunk.url,
        chunk.domain,
        ts,
        json.dumps(sorted(set(chunk.years))),
        chunk.source_kind.value,
        chunk.source_ref,
        chunk.trust.value,
        chunk.quality,
        json.dumps(dict(chunk.metadata), sort_keys=True, default=str),
        to_stored_simhash(chunk.simhash),
        chunk.url_key,
        chunk.title_key,
    )


def row_hit(row: Sequence[Any], *, rank: int, score: float, **extra: Any) -> Hit:
    """A :class:`~fabric.core.models.Hit` from a ``chunks`` row (``CHUNK_COLUMNS`` order)."""
    cid, doc_id, _chunk_id, title, text, url, domain, ts, years, kind, ref, trust, quality, meta = row[:14]
    sig, ukey, tkey = row[14:N_CHUNK_COLUMNS]
    metadata = json.loads(meta) if meta and meta != "{}" else {}  # most rows store none: no JSON parse for them
    metadata["years"] = json.loads(years) if years and years != "[]" else []
    metadata.update(extra.pop("metadata", {}))
    return Hit(
        id=cid,
        rank=rank,
        score=score,
        title=title,
        text=text,
        url=url,
        domain=domain,
        published_at=datetime.fromtimestamp(ts, UTC) if ts is not None else None,
        source_kind=SourceKind(kind),
        source_ref=ref,
        trust=Trust(trust),
        doc_id=doc_id,
        quality=quality,
        simhash=from_stored_simhash(sig),
        url_key=ukey,
        title_key=tkey,
        metadata=metadata,
        **extra,
    )


DateBounds = tuple[float, float, int, int]
"""A hard date range as :func:`filter_sql` applies it: first and last POSIX time, first and last year."""


def date_bounds(constraints: BoundConstraints) -> DateBounds | None:
    """The hard date range of ``constraints`` (an open end as a far bound), or None when there is none."""
    lo, hi = constraints.date_from, constraints.date_to
    if lo is None and hi is None:
        return None
    return (
        lo.timestamp() if lo else -1e18,
        hi.timestamp() if hi else 1e18,
        lo.year if lo else 0,
        hi.year if hi else 9999,
    )


def sites_sql(sites: Sequence[str], column: str) -> tuple[str, list[Any]]:
    """The ``site:`` condition on ``column`` (a domain): the site itself or any subdomain of it, by SQLite's
    ``=`` and ``LIKE`` (so ASCII case and ``LIKE``'s wildcards count as SQLite counts them)."""
    ors: list[str] = []
    params: list[Any] = []
    for site in sites:
        ors.append(f"({column} = ? OR {column} LIKE ?)")
        params += [site.lower(), f"%.{site.lower()}"]
    return "(" + " OR ".join(ors) + ")", params


def filter_sql(constraints: BoundConstraints, *, alias: str = "c", trust: str | None = None) -> tuple[str, list[Any]]:
    """A SQL condition (``"1"`` when unconstrained) and its parameters for date, site and trust filters.

    Dates (the router policy's year filter): a chunk passes when its ``published_at`` is in the range or a year it
    mentions
    (``years``, which includes the publication year) is in the range's years; a chunk with neither is excluded.
    """
    parts: list[str] = []
    params: list[Any] = []
    bounds = date_bounds(constraints)
    if bounds is not None:
        parts.append(
            f"(({alias}.published_at BETWEEN ? AND ?) OR "
            f"EXISTS (SELECT 1 FROM json_each({alias}.years) WHERE value BETWEEN ? AND ?))"
        )
        params += list(bounds)
    if constraints.sites:
        cond, site_params = sites_sql(constraints.sites, f"{alias}.domain")
        parts.append(cond)
        params += site_params
    if trust:
        parts.append(f"{alias}.trust = ?")
        params.append(trust)
    return (" AND ".join(parts) or "1"), params


def query_years_sql(constraints: BoundConstraints, *, alias: str = "c") -> tuple[str, list[Any]] | None:
    """The soft year condition for ``constraints.query_years`` (None when the query named no year).

    A chunk passes when it has no publication date or was published in the range: the inferred year filters
    only items that carry a date. Years a text merely mentions are content, not its date (CISI abstracts cite
    years; a question about "the 1979 totals" is not a request for 1979 items), and the query's year words
    already match them as terms. Lanes run it first and deep-fill a short answer from the same query without
    it (:func:`deep_fill`).
    """
    span = query_years_span(constraints)
    if span is None:
        return None
    return f"({alias}.published_at IS NULL OR {alias}.published_at BETWEEN ? AND ?)", list(span)


def query_years_span(constraints: BoundConstraints) -> tuple[float, float] | None:
    """The POSIX times of :func:`query_years_sql`'s range (first and last second of its years, UTC), or None."""
    if constraints.query_years is None:
        return None
    lo, hi = constraints.query_years
    return datetime(lo, 1, 1, tzinfo=UTC).timestamp(), datetime(hi, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()


def deep_fill(preferred: Sequence[Any], fallback: Sequence[Any], top_k: int) -> list[Any]:
    """``preferred`` rows (those passing a soft filter), then ``fallback`` rows (the unfiltered ranking) not
    already in, up to ``top_k``; rows are identified by their first column (the chunk id)."""
    out = list(preferred[:top_k])
    seen = {row[0] for row in out}
    for row in fallback:
        if len(out) >= top_k:
            break
        if row[0] not in seen:
            seen.add(row[0])
            out.append(row)
    return out


def non_increasing(scores: Sequence[float]) -> list[float]:
    """``scores`` capped by their running minimum: after a deep fill, an item placed below the preferred ones
    never carries a higher score than they do (score-based fusion would otherwise undo the order)."""
    out: list[float] = []
    for score in scores:
        out.append(min(score, out[-1]) if out else score)
    return out
