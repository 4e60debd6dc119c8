"""Keyword lane over the embedded SQLite FTS5 store (provider ``sqlite_fts5``), ranked by BM25.

Natural-language queries become a safe OR of quoted terms: the text is split into word tokens and each is
wrapped in double quotes, so user input can never reach FTS5 syntax (``NEAR``, ``*``, ``^``, column filters,
parentheses). English function words (:data:`~lanes.keyword.sqlite_fts.stopwords.ENGLISH_STOPWORDS`) are left out unless
the query has nothing else, and a term repeated in the query stays repeated: FTS5's ``bm25()`` adds one
contribution per query phrase, so a term said twice weighs twice, the query-term-frequency factor of textbook
BM25 (on CISI's long questions nDCG@10 0.3444 → 0.3918; docs/eval.md). Quoted phrases of two or more content
words from ``request.constraints.phrases`` join the OR as FTS5 phrases, ``phrase_boost`` times (a boost: a
chunk with the phrase ranks higher, one without it still matches); a one-word or stopword-only phrase adds
nothing (its words are already terms). BM25 weights the title above the body. The hard date range, ``site:``
domains and an optional trust filter apply in SQL; the query's inferred years (``query_years``) are a soft
filter: chunks published outside them come after every other match (deep fill), never dropped.

Ranking: FTS5's ``bm25()`` scores every row matching any term (no top-k pruning), 15-20 ms a query at 50K
passages. The OR is therefore ranked in :class:`~lanes.keyword.sqlite_fts.memory_index.MemoryIndex`, an in-memory copy
of
the same postings with the same formula and scores (about 1 ms at 50K), while that copy matches the committed
store: its phrases (quoted, or a word FTS5 splits) are matched by FTS5 alone and added in their place, and the
hard filters (a date range, ``site:``, the lane's trust) are masks over it
(:meth:`SqliteFtsKeywordLane._memory_ranker`). Otherwise FTS5 ranks. Only the ``top_k`` best rows' payload is
read from ``chunks``. ``memory = false`` turns the copy off.

Options (``lanes.toml``)::

    [lanes.keyword]
    kind = "keyword"
    backend = "sqlite_fts"
    options = { path = ".fabric/keyword.sqlite", title_weight = 2.0, text_weight = 1.0, trust = "",
                phrase_boost = 2, memory = true, prf_docs = 0, prf_terms = 10, prf_weight = 0.5 }

``prf_docs`` above 0 turns on RM3 pseudo-relevance feedback over the in-memory copy
(:mod:`~lanes.keyword.sqlite_fts.feedback`; off by default, measured in docs/ranking.md): the query is expanded by
``prf_terms`` words of its first ``prf_docs`` rows, the original keeping ``prf_weight`` of the weight. FTS5 alone
(no copy, or while a fresh copy is read) ranks without it.
"""

from __future__ import annotations

import asyncio
import functools
import re
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from fabric.core.errors import LaneBadResponse, LaneUnavailable
from fabric.core.models import Hit, LaneRequest
from lanes.base import Backend, BaseLane, LaneResources, LaneSpec
from lanes.keyword.sqlite_fts.feedback import Feedback
from lanes.keyword.sqlite_fts.memory_index import MemoryIndex, Posting
from lanes.keyword.sqlite_fts.stopwords import ENGLISH_STOPWORDS
from lanes.keyword.sqlite_fts.writer import FTS_SCHEMA, SqliteFtsWriter, fts_path
from lanes.sqlite_common import (
    CHUNK_COLUMNS,
    N_CHUNK_COLUMNS,
    DateBounds,
    SqliteDb,
    date_bounds,
    deep_fill,
    filter_sql,
    non_increasing,
    query_years_span,
    query_years_sql,
    row_hit,
    sites_sql,
)

__all__ = ["BACKEND", "SqliteFtsKeywordLane", "expression_parts", "match_expression", "query_terms"]

_TOKEN = re.compile(r"\w+", re.UNICODE)
RowFilter = tuple[DateBounds | None, str | None, tuple[str, ...]]
"""The hard filters: a date range (:func:`~lanes.sqlite_common.date_bounds`), a trust, ``site:`` domains."""
NO_FILTER: RowFilter = (None, None, ())
MemoryRanker = Callable[[int, tuple[float, float] | None], list[tuple[int, float]]]
"""``(top_k, published) -> (rowid, bm25)`` rows: the in-memory index's ranking of one query under its filters."""
_MAX_DOMAINS = 30_000
"""Most distinct domains the copy matches ``site:`` against (one SQL parameter each); more: FTS5 filters."""
_MAX_TERMS = 64


def _terms(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(text)]


def query_terms(query: str) -> list[str]:
    """The query's lower-case word tokens without stopwords (all of them if every one is a stopword), repeats
    kept in query order, at most :data:`_MAX_TERMS`."""
    words = _terms(query)
    content = [w for w in words if w not in ENGLISH_STOPWORDS]
    return (content or words)[:_MAX_TERMS]


def expression_parts(query: str, phrases: tuple[str, ...] = (), phrase_boost: int = 2) -> list[str]:
    """The quoted parts of :func:`match_expression`, in its order: the terms, then each phrase ``phrase_boost``
    times (its words joined by spaces). FTS5 makes one query phrase of each, a term it splits into several tokens
    (``snake_case``) included."""
    parts = query_terms(query)
    for phrase in phrases:
        words = _terms(phrase)
        if len(words) >= 2 and any(w not in ENGLISH_STOPWORDS for w in words):
            parts += [" ".join(words)] * max(phrase_boost, 0)
        elif not parts and words:  # a query that is nothing but a quoted word still searches for it
            parts.append(" ".join(words))
    return parts


def match_expression(query: str, phrases: tuple[str, ...] = (), phrase_boost: int = 2) -> str | None:
    """The FTS5 MATCH expression for ``query``: one OR of quoted terms and boosted quoted phrases.

    Terms come from :func:`query_terms` (stopwords out, repeats kept so BM25 counts them). Each phrase of two or
    more words with a content word is added ``phrase_boost`` times as an FTS5 phrase, so BM25 adds its weight
    that often: phrases raise a chunk, they are never required. Only ``\\w+`` tokens reach the expression,
    each inside double quotes, so it is always valid FTS5 syntax. Returns None when there is no searchable token.
    """
    return _or_of(expression_parts(query, phrases, phrase_boost))


def _or_of(parts: list[str]) -> str | None:
    """The FTS5 OR of ``parts``, each quoted (None for no part)."""
    return "(" + " OR ".join(f'"{part}"' for part in parts) + ")" if parts else None


def _feedback(opts: Mapping[str, Any]) -> Feedback | None:
    """The lane's RM3 feedback from ``prf_docs`` (0 or absent: off), ``prf_terms`` and ``prf_weight``."""
    docs = int(opts.get("prf_docs", 0))
    if docs <= 0:
        return None
    return Feedback(docs=docs, terms=int(opts.get("prf_terms", 10)), weight=float(opts.get("prf_weight", 0.5)))


def _map_error(exc: sqlite3.Error) -> Exception:
    if isinstance(exc, sqlite3.OperationalError) and "fts5" not in str(exc).lower():
        return LaneUnavailable(f"sqlite error: {exc}", provider="sqlite_fts5")
    return LaneBadResponse(f"sqlite error: {exc}", provider="sqlite_fts5")


def _with_payload(conn: sqlite3.Connection, top: list[Any]) -> list[Any]:
    """``(rowid, score)`` rows as ``chunks`` rows (``CHUNK_COLUMNS``) followed by the score, in the same order; a
    row a writer deleted between the ranking and this read is left out."""
    if not top:
        return []
    sql = f"SELECT rowid, {CHUNK_COLUMNS} FROM chunks WHERE rowid IN ({', '.join('?' * len(top))})"
    payload = {row[0]: row[1:] for row in conn.execute(sql, [rowid for rowid, _ in top])}
    return [(*payload[rowid], score) for rowid, score in top if rowid in payload]


class SqliteFtsKeywordLane(BaseLane):
    """BM25 over SQLite FTS5 with porter stemming; title weighted above body."""

    provider = "sqlite_fts5"
    year_filter_native = True  # the date range filters in the store, before the top-k

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        super().__init__(spec, resources)
        opts = spec.options
        self.title_weight = float(opts.get("title_weight", 2.0))
        self.text_weight = float(opts.get("text_weight", 1.0))
        self.trust = str(opts.get("trust", "")) or None
        self.phrase_boost = int(opts.get("phrase_boost", 2))
        self.db = SqliteDb(fts_path(spec, resources), FTS_SCHEMA)
        self.feedback = _feedback(opts)
        self.memory = (
            MemoryIndex(self.db.path, self.title_weight, self.text_weight, forward=self.feedback is not None)
            if opts.get("memory", True)
            else None
        )

    async def open(self) -> None:
        """Open this thread's connection (creating the schema when the store is new); start reading the
        in-memory copy of the postings."""
        await self.db.run(lambda conn: None)
        if self.memory is not None:
            self.memory.snapshot()

    def warming(self) -> bool:
        """While the first in-memory copy of the postings is read (2.7 s at 50K entries), FTS5 ranks alone."""
        return self.memory is not None and self.memory.loading_first

    async def search(self, request: LaneRequest) -> list[Hit]:
        """BM25-ranked chunks matching any query term or phrase; inside the query's years first (deep fill)."""
        parts = expression_parts(request.query, request.constraints.phrases, self.phrase_boost)
        expr = _or_of(parts)
        if expr is None or request.top_k <= 0:
            return []
        where, params = filter_sql(request.constraints, trust=self.trust)
        filters = (date_bounds(request.constraints), self.trust, request.constraints.sites)
        soft = query_years_sql(request.constraints)
        top_k = request.top_k

        def ranked(conn: sqlite3.Connection) -> list[Any]:
            ranker = self._memory_ranker(conn, parts, filters)  # phrases and masks read once for both rankings
            rows = self._ranked(conn, expr, where, params, top_k, ranker)
            if soft is None:
                return rows
            # the query's years: matching or undated chunks first, then the rest
            cond, extra = soft
            span = query_years_span(request.constraints)
            preferred = self._ranked(conn, expr, f"{where} AND {cond}", [*params, *extra], top_k, ranker, span)
            return deep_fill(preferred, rows, top_k)

        try:
            rows = await self.db.run(ranked)
        except sqlite3.Error as exc:
            raise _map_error(exc) from exc
        scores = non_increasing([-float(row[N_CHUNK_COLUMNS]) for row in rows])
        return [
            row_hit(row, rank=i, score=score, metadata={"match": expr})
            for i, (row, score) in enumerate(zip(rows, scores, strict=True), start=1)
        ]

    def _ranked(
        self,
        conn: sqlite3.Connection,
        expr: str,
        where: str,
        params: list[Any],
        top_k: int,
        ranker: MemoryRanker | None = None,
        published: tuple[float, float] | None = None,
    ) -> list[Any]:
        """The ``top_k`` best chunk rows (``CHUNK_COLUMNS`` and the score) matching ``expr`` under ``where``.

        Ranked by ``ranker`` (:meth:`_memory_ranker`, which applies the filters ``where`` says in SQL, and
        ``published`` the soft years ``where`` adds) when there is one; else by FTS5 alone when nothing filters,
        else by FTS5 joined with ``chunks``. Only the ``top_k`` best rows' payload is read: joining ``chunks``
        before the sort reads a payload row for every match (thousands at 50K entries), 1.5 x the time.
        """
        if ranker is not None:
            return _with_payload(conn, ranker(top_k, published))
        if where == "1":
            sql = "SELECT rowid, bm25(chunks_fts, ?, ?) AS s FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY s, rowid"
            sql += " LIMIT ?"
            return _with_payload(conn, conn.execute(sql, [self.title_weight, self.text_weight, expr, top_k]).fetchall())
        cols = ", ".join(f"c.{col.strip()}" for col in CHUNK_COLUMNS.split(","))
        sql = (
            f"SELECT {cols}, bm25(chunks_fts, ?, ?) AS s FROM chunks_fts "
            f"JOIN chunks c ON c.rowid = chunks_fts.rowid "
            f"WHERE chunks_fts MATCH ? AND {where} ORDER BY s, c.rowid LIMIT ?"
        )
        return conn.execute(sql, [self.title_weight, self.text_weight, expr, *params, top_k]).fetchall()

    def _memory_ranker(
        self, conn: sqlite3.Connection, parts: list[str], filters: RowFilter = NO_FILTER
    ) -> MemoryRanker | None:
        """``(top_k, published) -> (rowid, bm25)`` of the best rows from the in-memory index, or None when it
        cannot answer (no index, or not current). ``published`` ``(lo, hi)`` keeps undated chunks and those
        published in the range: the query years' soft preference (``query_years_sql``), which FTS5 ranked by
        joining ``chunks``, 40-55 ms of CPU for a claim with a year at 50K entries. ``filters`` (a hard date range,
        a trust, ``site:``) keep the rows :func:`~lanes.sqlite_common.filter_sql` keeps (:meth:`Snapshot.passing`):
        FTS5 joined with ``chunks`` took 11 ms p50, 23 ms p95 at 50K under a date range. Which of the copy's
        domains the sites match, SQLite tells (the same ``sites_sql`` over the domains bound as parameters).

        A part that is one FTS5 token is looked up in the copy; a phrase, or a word FTS5 splits (``CRF01_1b2k``),
        is matched by FTS5 alone on ``conn`` (its rows and their ``bm25()`` as the only phrase of a query, which is
        its contribution to the whole OR: the same row count, lengths and document frequency), read while the
        copy is current. Before, any phrase sent the whole OR to FTS5: 27-46 ms at 50K."""
        memory = self.memory
        snap = memory.snapshot() if memory is not None else None
        if memory is None or snap is None:
            return None
        terms: list[str | Posting] = []
        phrases: dict[str, Posting] = {}
        for part in parts:
            stem = memory.stems([part])
            if stem is not None:
                terms.append(stem[0])
                continue
            if part not in phrases:
                sql = "SELECT rowid, bm25(chunks_fts, ?, ?) FROM chunks_fts WHERE chunks_fts MATCH ?"
                found = conn.execute(sql, [self.title_weight, self.text_weight, f'"{part}"']).fetchall()
                rows = np.array([r for r, _ in found], dtype=np.int64)
                phrases[part] = (rows, -np.array([b for _, b in found], dtype=np.float64))
            terms.append(phrases[part])
        if phrases and (
            memory.snapshot() is not snap or any(len(r) and r.max() >= snap.size for r, _ in phrases.values())
        ):
            return None  # a writer committed meanwhile: the phrases' rows may be of another state
        dates, trust, sites = filters
        domains: set[str] | None = None
        if sites:
            if len(snap.domains) > _MAX_DOMAINS:
                return None
            cond, params = sites_sql(sites, "value")
            rows_sql = ", ".join(["(?)"] * len(snap.domains)) or "(NULL)"
            sql = f"WITH d(value) AS (VALUES {rows_sql}) SELECT value FROM d WHERE {cond}"
            domains = {d for (d,) in conn.execute(sql, [*snap.domains, *params])}
        keep = snap.passing(dates, trust, domains) if dates is not None or trust or sites else None
        if self.feedback is not None and snap.forward is not None:
            return functools.partial(snap.top_feedback, terms, keep=keep, feedback=self.feedback)
        return functools.partial(snap.top, terms, keep=keep)

    async def aclose(self) -> None:
        """Close the connections (after a running refresh of the in-memory index)."""
        if self.memory is not None:
            await asyncio.to_thread(self.memory.close)
        await self.db.aclose()


BACKEND = Backend(name="sqlite_fts", lane=SqliteFtsKeywordLane, writer=SqliteFtsWriter)
"""The embedded keyword store: SQLite FTS5 under the fabric home."""
