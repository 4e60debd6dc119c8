"""Tests of the in-memory copy of the FTS5 postings: FTS5's own scores, refreshed after every commit."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lanes.keyword.sqlite_fts.lane as mod_fts
import lanes.keyword.sqlite_fts.memory_index as mod
import lanes.sqlite_common as mod_sql
from fabric.core.models import LaneKind, LaneRequest
from lanes.keyword.sqlite_fts.lane import SqliteFtsKeywordLane, match_expression, query_terms
from lanes.keyword.sqlite_fts.memory_index import MemoryIndex
from lanes.keyword.sqlite_fts.writer import SqliteFtsWriter, fts_path
from tests.support.embedded import chunk, resources, spec

CORPUS = [
    chunk("a", "Reciprocal rank fusion merges ranked lists from several retrievers.", title="Fusion notes"),
    chunk("b", "The fusion reactor runs hot; the reactor hall is cooled by water.", title="Reactor"),
    chunk("c", "Runners were running quickly during the marathon, running again.", title="Sport"),
    chunk("d", "Rank the runners by time.", title="Results of the fusion race"),
    chunk("e", "Nothing in common here.", title=""),
]
QUERIES = ["rank fusion", "running reactor fusion fusion", "runners rank", "reactor", "absent words only"]


async def _store(tmp_path: Path, chunks=CORPUS) -> SqliteFtsWriter:
    writer = SqliteFtsWriter(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path))
    await writer.open()
    await writer.upsert(chunks)
    return writer


@asynccontextmanager
async def _two_lanes(
    tmp_path: Path, **options: Any
) -> AsyncIterator[tuple[SqliteFtsKeywordLane, SqliteFtsKeywordLane]]:
    """The lane over the store in ``tmp_path`` with its in-memory copy (read) and the same lane without it."""
    with_memory = SqliteFtsKeywordLane(spec(LaneKind.KEYWORD, "sqlite_fts", **options), resources(tmp_path))
    fts_only = SqliteFtsKeywordLane(spec(LaneKind.KEYWORD, "sqlite_fts", memory=False, **options), resources(tmp_path))
    async with with_memory, fts_only:
        assert with_memory.memory is not None
        assert fts_only.memory is None
        with_memory.memory.wait()
        yield with_memory, fts_only


async def _answer_alike(lanes: tuple[SqliteFtsKeywordLane, SqliteFtsKeywordLane], request: LaneRequest) -> None:
    """Both lanes give the same hits, in the same order, with the same scores (to 1e-12)."""
    got, want = await lanes[0].search(request), await lanes[1].search(request)
    assert [(h.id, pytest.approx(h.score, rel=1e-12)) for h in got] == [(h.id, h.score) for h in want], request


def _fts5(index: MemoryIndex, query: str, k: int = 10) -> list[tuple[int, float]]:
    """FTS5's own ranking of the same OR query, ``(rowid, bm25)``."""
    title, text = index.weights
    sql = "SELECT rowid, bm25(chunks_fts, ?, ?) AS s FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY s, rowid LIMIT ?"
    assert index._conn is not None
    return index._conn.execute(sql, [title, text, match_expression(query), k]).fetchall()


def _memory(index: MemoryIndex, query: str, k: int = 10) -> list[tuple[int, float]]:
    snap = index.snapshot()
    stems = index.stems(query_terms(query))
    assert snap is not None
    assert stems is not None
    return snap.top(stems, k)


def _same(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> bool:
    return [r for r, _ in got] == [r for r, _ in want] and all(
        s == pytest.approx(w, rel=1e-12) for (_, s), (_, w) in zip(got, want, strict=True)
    )


class TestScores:
    @pytest.mark.parametrize(("title", "text"), [(2.0, 1.0), (1.0, 1.0), (3.5, 0.5)])
    async def test_scores_equal_fts5_bm25(self, tmp_path: Path, title: float, text: float) -> None:
        """Every query ranks the same rows in the same order with FTS5's scores (repeats and weights too)."""
        writer = await _store(tmp_path)
        index = MemoryIndex(fts_path(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path)), title, text)
        index.refresh()
        for query in QUERIES:
            assert _same(_memory(index, query), _fts5(index, query)), query
        assert _memory(index, "absent words only") == []
        index.close()
        await writer.aclose()

    @pytest.mark.parametrize("k", [1, 2, 4, 30])
    async def test_a_publication_range_ranks_as_fts5_joined_with_it(self, tmp_path: Path, k: int) -> None:
        """``published`` keeps undated rows and rows published in the range (bounds included): the same rows,
        order and scores as FTS5 joined with the query years' condition, the best-scoring rows outside it left out,
        and none when nothing inside matches."""
        from datetime import UTC, datetime

        def at(year: int) -> datetime:
            return datetime(year, 6, 1, tzinfo=UTC)

        dated = [
            chunk("d1", "fusion fusion fusion rank", title="Fusion", published_at=at(2019)),
            chunk("d2", "fusion rank", published_at=at(2021)),
            chunk("d3", "fusion of ranks and runners", published_at=datetime(2022, 1, 1, tzinfo=UTC)),
            chunk("d4", "rank fusion rank", published_at=at(2023)),
            chunk("d5", "reactor", published_at=at(2021)),
        ]
        writer = await _store(tmp_path, [*CORPUS, *dated])
        index = MemoryIndex(fts_path(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path)), 2.0, 1.0)
        index.refresh()
        snap = index.snapshot()
        assert snap is not None
        lo, hi = datetime(2020, 1, 1, tzinfo=UTC).timestamp(), datetime(2022, 1, 1, tzinfo=UTC).timestamp()
        sql = (
            "SELECT f.rowid, bm25(chunks_fts, 2.0, 1.0) AS s FROM chunks_fts f JOIN chunks c ON c.rowid = f.rowid "
            "WHERE chunks_fts MATCH ? AND (c.published_at IS NULL OR c.published_at BETWEEN ? AND ?) "
            "ORDER BY s, f.rowid LIMIT ?"
        )
        assert index._conn is not None
        for query in [*QUERIES, "fusion rank", "runners"]:
            stems = index.stems(query_terms(query))
            assert stems is not None
            want = index._conn.execute(sql, [match_expression(query), lo, hi, k]).fetchall()
            got = snap.top(stems, k, (lo, hi))
            assert _same(got, want), (query, k)
        rowid = {cid: r for r, cid in index._conn.execute("SELECT rowid, id FROM chunks")}
        ranked = [r for r, _ in snap.top(index.stems(["fusion"]) or [], 30, (lo, hi))]
        assert {rowid["d1"], rowid["d4"]}.isdisjoint(ranked)  # 2019 and 2023: outside
        assert {rowid["d2"], rowid["d3"]} <= set(ranked)  # 2021 and the range's last second
        undated = [r for r, _ in snap.top(index.stems(["runners"]) or [], 5, (0.0, 1.0))]  # 1970: undated only
        assert sorted(undated) == sorted([rowid["c"], rowid["d"]])  # d3 (2022) mentions runners too
        index.close()
        await writer.aclose()

    async def test_top_k_keeps_the_best(self, tmp_path: Path) -> None:
        """With fewer slots than matches the best rows are kept, best first."""
        writer = await _store(tmp_path)
        index = MemoryIndex(fts_path(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path)), 2.0, 1.0)
        index.refresh()
        assert _same(_memory(index, "rank fusion runners", 2), _fts5(index, "rank fusion runners", 2))
        index.close()
        await writer.aclose()

    @pytest.mark.parametrize("k", [1, 3, 7, 12, 40])
    async def test_ties_at_the_cut_go_by_rowid_as_in_fts5(self, tmp_path: Path, k: int) -> None:
        """Many rows with equal scores, cut anywhere: the same rows as FTS5's ``ORDER BY bm25, rowid``, whether
        the floor comes from the shortest posting list alone, from several, or from none (fewer than k rows)."""
        same = [chunk(f"t{i}", "alpha beta gamma", title="") for i in range(20)]
        rare = [chunk(f"r{i}", f"alpha rare{i % 2} gamma", title="") for i in range(6)]
        writer = await _store(tmp_path, [*same, *rare, chunk("z", "beta delta", title="")])
        index = MemoryIndex(fts_path(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path)), 2.0, 1.0)
        index.refresh()
        for query in ("alpha gamma", "rare0 rare1 alpha", "rare1 delta", "beta", "delta"):
            assert _same(_memory(index, query, k), _fts5(index, query, k)), (query, k)
        index.close()
        await writer.aclose()

    async def test_an_empty_store_has_no_postings(self, tmp_path: Path) -> None:
        writer = await _store(tmp_path, [])
        index = MemoryIndex(fts_path(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path)), 2.0, 1.0)
        index.refresh()
        snap = index.snapshot()
        assert snap is not None
        assert snap.top(["rank"], 5) == []
        assert snap.n_rows == 0
        index.close()
        await writer.aclose()


class TestFreshness:
    async def test_a_commit_elsewhere_retires_the_snapshot_until_reread(self, tmp_path: Path) -> None:
        """After a writer commits, the old snapshot is never used; a background read brings the new rows in,
        and deleted rows out."""
        writer = await _store(tmp_path)
        index = MemoryIndex(fts_path(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path)), 2.0, 1.0, pause=0)
        index.refresh()
        await writer.upsert([chunk("f", "Zeppelin fusion", title="Airship")])
        assert index.snapshot() is None
        index.wait()
        assert _same(_memory(index, "zeppelin fusion"), _fts5(index, "zeppelin fusion"))
        assert len(_memory(index, "zeppelin")) == 1
        await writer.delete(["f", "a"])
        assert index.snapshot() is None
        index.wait()
        assert _memory(index, "zeppelin") == []
        assert _same(_memory(index, "rank fusion"), _fts5(index, "rank fusion"))
        index.close()
        await writer.aclose()

    async def test_an_unreadable_store_leaves_no_snapshot(self, tmp_path: Path) -> None:
        """A file that is not an FTS5 store gives no snapshot (the lane keeps asking FTS5, which reports it)."""
        path = tmp_path / "other.sqlite"
        index = MemoryIndex(path, 2.0, 1.0)
        index.refresh()
        assert index._snapshot is None
        index.close()


class TestStems:
    def test_words_get_fts5_porter_stems(self, tmp_path: Path) -> None:
        index = MemoryIndex(tmp_path / "unused.sqlite", 2.0, 1.0)
        assert index.stems(["running", "runners", "fusion", "café"]) == ["run", "runner", "fusion", "cafe"]
        index.close()

    def test_a_word_fts5_splits_is_not_stemmed(self, tmp_path: Path) -> None:
        """``\\w+`` keeps ``snake_case`` whole; FTS5 makes two tokens of it, a phrase only FTS5 can match."""
        index = MemoryIndex(tmp_path / "unused.sqlite", 2.0, 1.0)
        assert index.stems(["snake_case"]) is None
        index.close()


class TestLane:
    async def test_lane_answers_as_fts5_alone(self, tmp_path: Path) -> None:
        """The lane with its in-memory index and the lane without it give the same hits and scores."""
        await (await _store(tmp_path)).aclose()
        async with _two_lanes(tmp_path) as lanes:
            for query in QUERIES:
                await _answer_alike(lanes, LaneRequest(query=query, top_k=3))
            assert lanes[0].memory is not None
            assert lanes[0].memory.snapshot() is not None

    async def test_lane_with_query_years_answers_as_fts5_alone(self, tmp_path: Path) -> None:
        """The query years' soft preference ranked in memory (undated and in-range chunks first, then the rest)
        gives the hits and scores FTS5 gives."""
        from datetime import UTC, datetime

        from fabric.core.vocabulary import BoundConstraints

        dated = [
            chunk("y1", "fusion rank fusion", title="Fusion", published_at=datetime(2019, 3, 1, tzinfo=UTC)),
            chunk("y2", "fusion of runners", published_at=datetime(2021, 3, 1, tzinfo=UTC)),
            chunk("y3", "rank reactor", published_at=datetime(2024, 3, 1, tzinfo=UTC)),
        ]
        await (await _store(tmp_path, [*CORPUS, *dated])).aclose()
        async with _two_lanes(tmp_path) as lanes:
            for years in [(2021, 2021), (2019, 2024), (1990, 1991)]:
                for query in [*QUERIES, "fusion rank runners"]:
                    c = BoundConstraints(query_years=years)
                    await _answer_alike(lanes, LaneRequest(query=query, top_k=4, constraints=c))
            assert lanes[0].memory is not None
            assert lanes[0].memory.snapshot() is not None


PHRASED = [
    chunk("p1", "Reciprocal rank fusion: rank fusion of ranked lists.", title="Rank fusion"),
    chunk("p2", "The snake_case names and snake case words; fusion of cases.", title="Naming"),
    chunk("p3", "A case of snake bites, and fusion rank again.", title="Snakes"),
    chunk("p4", "CRF01_1b2k origin", title="Virus strains"),
]
PHRASE_QUERIES = [
    ("rank fusion", ("rank fusion",)),
    ("fusion", ("rank fusion",)),
    ("snake_case fusion", ()),
    ("CRF01_1b2k origin", ()),
    ("snake case", ("snake case", "ranked lists")),
    ("the of", ("rank fusion",)),
    ("absent", ("absent phrase words",)),
    ("fusion", ("of the",)),
    ("crf01_1b2k", ("snake_case names",)),
    ("_ __init__ rank", ()),
]
"""Queries with quoted phrases (FTS5 phrases, ``phrase_boost`` times) and words FTS5 splits into phrases."""


class TestPhrases:
    async def test_phrases_and_split_words_rank_in_memory_as_fts5_alone(self, tmp_path: Path) -> None:
        """A query with phrases, or with a word FTS5 splits, ranks in memory (the phrases' rows read from FTS5),
        with FTS5's hits and scores, with and without the query years' preference."""
        from datetime import UTC, datetime

        from fabric.core.vocabulary import BoundConstraints

        dated = [chunk("y1", "rank fusion in 2019", published_at=datetime(2019, 3, 1, tzinfo=UTC))]
        await (await _store(tmp_path, [*CORPUS, *PHRASED, *dated])).aclose()
        async with _two_lanes(tmp_path) as lanes:
            with_memory = lanes[0]
            for query, phrases in PHRASE_QUERIES:
                for years in [None, (2019, 2019), (1990, 1991)]:
                    for k in (1, 3, 20):
                        c = BoundConstraints(phrases=phrases, query_years=years)
                        await _answer_alike(lanes, LaneRequest(query=query, top_k=k, constraints=c))
                parts = mod_fts.expression_parts(query, phrases, with_memory.phrase_boost)
                top = await with_memory.db.run(lambda conn, p=parts: with_memory._memory_ranker(conn, p))
                assert top is not None  # the copy answered: FTS5 matched only the phrases
            assert any(
                len(parts) > len(set(parts)) for parts in (mod_fts.expression_parts(q, p) for q, p in PHRASE_QUERIES)
            )

    async def test_a_commit_while_phrases_are_read_hands_the_query_to_fts5(self, tmp_path: Path) -> None:
        """The phrases' rows come from the store's latest state: when a writer committed after the copy was read,
        the copy does not answer (None), and the lane's answer is FTS5's."""
        writer = await _store(tmp_path, [*CORPUS, *PHRASED])
        lane = SqliteFtsKeywordLane(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path))
        async with lane:
            assert lane.memory is not None
            lane.memory.wait()
            parts = mod_fts.expression_parts("fusion", ("rank fusion",))
            assert await lane.db.run(lambda conn: lane._memory_ranker(conn, parts)) is not None
            await writer.upsert([chunk("p5", "rank fusion rank fusion", title="Rank fusion")])
            assert await lane.db.run(lambda conn: lane._memory_ranker(conn, parts)) is None
            hits = await lane.search(LaneRequest(query="fusion", top_k=3))
            assert "p5" in [h.id for h in hits]
        await writer.aclose()

    async def test_a_commit_during_the_phrase_reads_is_noticed(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The copy is current when the phrases are read but not after (a writer committed in between): the copy
        does not answer, since the phrases' rows may be of the newer state."""
        writer = await _store(tmp_path, [*CORPUS, *PHRASED])
        await writer.aclose()
        lane = SqliteFtsKeywordLane(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path))
        async with lane:
            memory = lane.memory
            assert memory is not None
            memory.wait()
            snap = memory.snapshot()
            answers = iter([snap, None])
            monkeypatch.setattr(memory, "snapshot", lambda: next(answers))
            parts = mod_fts.expression_parts("fusion", ("rank fusion",))
            assert await lane.db.run(lambda conn: lane._memory_ranker(conn, parts)) is None
            answers = iter([snap, snap])
            assert await lane.db.run(lambda conn: lane._memory_ranker(conn, parts)) is not None


def _filtered_corpus() -> list[Any]:
    from datetime import UTC, datetime

    from fabric.core.models import Trust

    def at(year: int) -> datetime:
        return datetime(year, 6, 1, tzinfo=UTC)

    return [
        *CORPUS,
        chunk("h1", "rank fusion published in 2019", published_at=at(2019), trust=Trust.TRUSTED, domain="example.org"),
        chunk("h2", "fusion of runners, a study of 2005 and 2012", title="Rank review", domain="news.example.org"),
        chunk("h3", "rank reactor fusion", published_at=at(2024), domain="example.org.evil.net"),
        chunk("h4", "fusion rank fusion notes", published_at=at(2012), trust=Trust.TRUSTED, domain="Docs.Example.ORG"),
        chunk("h5", "runners rank in 1999", trust=Trust.TRUSTED, domain="exampleXorg"),
        chunk("h6", "reactor rank", published_at=datetime(2012, 12, 31, 23, 59, 59, tzinfo=UTC), domain="a_b.com"),
        chunk("h7", "rank fusion of a_b", domain="axb.com"),
        chunk("h8", "rank runners of axb", domain="www.axb.com"),
    ]


def _hard_filters() -> list[Any]:
    """Date ranges (closed, open at either end, one matched only through a mentioned year), none, and sites
    (subdomains, ASCII case, ``LIKE``'s ``_`` wildcard, a site no row has, a site with a date range)."""
    from datetime import UTC, datetime

    from fabric.core.vocabulary import BoundConstraints

    def day(y: int, m: int = 1, d: int = 1) -> datetime:
        return datetime(y, m, d, tzinfo=UTC)

    return [
        BoundConstraints(),
        BoundConstraints(date_from=day(2012), date_to=datetime(2012, 12, 31, 23, 59, 59, tzinfo=UTC)),
        BoundConstraints(date_from=day(2013)),
        BoundConstraints(date_to=day(2006)),
        BoundConstraints(date_from=day(1999), date_to=day(1999, 12, 31)),
        BoundConstraints(date_from=day(2030)),
        BoundConstraints(date_from=day(2010), query_years=(2012, 2012)),
        BoundConstraints(sites=("example.org",)),
        BoundConstraints(sites=("EXAMPLE.org", "a_b.com")),
        BoundConstraints(sites=("nowhere.test",)),
        BoundConstraints(sites=("example.org",), date_from=day(2012)),
    ]


class TestHardFilters:
    async def test_passing_rows_are_those_the_sql_filter_keeps(self, tmp_path: Path) -> None:
        """The copy's mask of a date range and a trust is the rows ``filter_sql``'s condition selects (a year
        stored as text too, which SQLite's numeric ``BETWEEN`` never passes)."""
        import sqlite3

        from lanes.sqlite_common import date_bounds, filter_sql, sites_sql

        writer = await _store(tmp_path, _filtered_corpus())
        await writer.aclose()
        path = fts_path(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path))
        with sqlite3.connect(path) as raw:
            raw.execute("""UPDATE chunks SET years = '["2012", 1999]' WHERE id = 'h5'""")
        index = MemoryIndex(path, 2.0, 1.0)
        index.refresh()
        snap = index.snapshot()
        assert snap is not None
        assert index._conn is not None
        existing = {r for (r,) in index._conn.execute("SELECT rowid FROM chunks") if r < snap.size}
        checked = 0
        for c in _hard_filters():
            cond, site_params = sites_sql(c.sites, "value")
            sites_of = (
                f"WITH d(value) AS (VALUES {', '.join(['(?)'] * len(snap.domains))}) SELECT value FROM d WHERE {cond}"
            )
            domains = {d for (d,) in index._conn.execute(sites_of, [*snap.domains, *site_params])} if c.sites else None
            for trust in (None, "trusted", "untrusted", "nobody"):
                where, params = filter_sql(c, trust=trust)
                sql = f"SELECT rowid FROM chunks c WHERE {where}"
                want = {r for (r,) in index._conn.execute(sql, params) if r < snap.size}
                got = set(np.flatnonzero(snap.passing(date_bounds(c), trust, domains)).tolist()) & existing
                assert got == want, (c, trust)
                checked += len(want)
        assert checked > 0
        index.close()

    async def test_lane_under_hard_filters_answers_as_fts5_alone(self, tmp_path: Path) -> None:
        """Dates, ``site:`` and trust ranked in memory: the lane with the copy and without it give the same hits
        and scores, and the copy really answers."""
        await (await _store(tmp_path, _filtered_corpus())).aclose()
        for trust in ("", "trusted"):
            async with _two_lanes(tmp_path, trust=trust) as lanes:
                with_memory, fts_only = lanes
                for c in _hard_filters():
                    for query in [*QUERIES, "fusion rank runners", "rank"]:
                        for k in (1, 2, 10):
                            await _answer_alike(lanes, LaneRequest(query=query, top_k=k, constraints=c))
                    filters = (mod_sql.date_bounds(c), trust or None, c.sites)
                    top = await with_memory.db.run(
                        lambda conn, f=filters, lane=with_memory: lane._memory_ranker(conn, ["rank"], f)
                    )
                    assert top is not None
                assert await fts_only.search(LaneRequest(query="rank", top_k=3, constraints=_hard_filters()[1]))
                sites = _hard_filters()[-3]  # EXAMPLE.org and a_b.com: subdomains, case and LIKE's "_" count
                hits = await with_memory.search(LaneRequest(query="rank fusion runners", top_k=20, constraints=sites))
                assert {h.id for h in hits} == ({"h1", "h4"} if trust else {"h1", "h2", "h4", "h6", "h8"})


class TestWarming:
    async def test_the_lane_warms_until_its_first_snapshot_is_read(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """From ``open`` until the first in-memory copy is read the lane says it is warming (and answers from
        FTS5 meanwhile); afterwards it never is, not even while a later commit's copy is read."""
        writer = await _store(tmp_path)
        gate = threading.Event()
        read = mod.read_snapshot

        def held(*args: Any, **kwargs: Any) -> Any:
            gate.wait(30)
            return read(*args, **kwargs)

        monkeypatch.setattr(mod, "read_snapshot", held)
        lane = SqliteFtsKeywordLane(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path))
        fts_only = SqliteFtsKeywordLane(spec(LaneKind.KEYWORD, "sqlite_fts", memory=False), resources(tmp_path))
        async with lane, fts_only:
            assert lane.warming()
            assert not fts_only.warming()
            assert [h.id for h in await lane.search(LaneRequest(query="rank fusion", top_k=3))]  # FTS5 answers
            gate.set()
            assert lane.memory is not None
            lane.memory.wait()
            assert not lane.warming()
            monkeypatch.setattr(mod, "read_snapshot", held)
            gate.clear()
            await writer.upsert([chunk("f", "Zeppelin fusion", title="Airship")])
            assert lane.memory.snapshot() is None  # a fresh copy is being read: not warming again
            assert not lane.warming()
            gate.set()
            lane.memory.wait()
        await writer.aclose()

    async def test_a_first_read_that_fails_is_not_warming(self, tmp_path: Path) -> None:
        """An unreadable store leaves no snapshot but no read under way either (FTS5 reports its errors)."""
        index = MemoryIndex(tmp_path / "other.sqlite", 2.0, 1.0)
        assert not index.loading_first
        assert index.snapshot() is None
        index.wait()
        assert not index.loading_first
        gate = threading.Event()
        index.refresh = lambda: gate.wait(30)  # type: ignore[method-assign]  # a retry that takes its time
        assert index.snapshot() is None
        assert index._loader is not None
        assert index._loader.is_alive()
        assert not index.loading_first  # retrying a store that failed is not warming
        gate.set()
        index.wait()
        index.close()


async def test_reads_pause_after_a_read(tmp_path: Path) -> None:
    """Right after a read, a commit does not start another one before the pause has passed: FTS5 answers."""
    writer = await _store(tmp_path)
    index = MemoryIndex(fts_path(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path)), 2.0, 1.0, pause=1e6)
    index.refresh()
    await writer.upsert([chunk("f", "Zeppelin", title="Airship")])
    assert index.snapshot() is None
    assert index._loader is None
    index.close()
    await writer.aclose()


def test_public_api() -> None:
    assert sorted(mod.__all__) == ["MemoryIndex", "Posting", "Snapshot"]
