"""Tests of the shared SQLite lane helpers: the soft year condition, deep fill, score capping and the SimHash column."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from fabric.core.chunks import to_stored_simhash
from fabric.core.models import BoundConstraints
from lanes.sqlite_common import (
    CHUNK_COLUMNS,
    CHUNKS_DDL,
    N_CHUNK_COLUMNS,
    SqliteDb,
    chunk_row,
    date_bounds,
    deep_fill,
    filter_sql,
    non_increasing,
    query_years_sql,
    row_hit,
)
from tests.support.embedded import chunk


def test_no_query_years_gives_no_condition() -> None:
    """Without inferred years there is nothing to prefer."""
    assert query_years_sql(BoundConstraints()) is None


def test_query_years_condition_keeps_undated_and_in_range_rows() -> None:
    """The soft condition passes rows without a publication date and rows published in the years, in SQLite."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE chunks (id TEXT, published_at REAL, years TEXT)")
    rows = [("undated", None, "[1975]"), ("in", 1.0e9, "[]"), ("out", 1.5e9, "[]")]  # 2001-09 and 2017-07
    conn.executemany("INSERT INTO chunks VALUES (?, ?, ?)", rows)
    cond, params = query_years_sql(BoundConstraints(query_years=(2001, 2001))) or ("", [])
    found = [r[0] for r in conn.execute(f"SELECT id FROM chunks c WHERE {cond} ORDER BY id", params)]
    assert found == ["in", "undated"]


def test_date_bounds_are_the_filters_numbers_with_far_open_ends() -> None:
    """A closed range gives its first and last second and years; an open end a far bound; no range None. The
    SQL filter takes exactly these numbers."""
    from datetime import UTC, datetime

    lo, hi = datetime(2019, 1, 1, tzinfo=UTC), datetime(2021, 12, 31, tzinfo=UTC)
    assert date_bounds(BoundConstraints()) is None
    assert date_bounds(BoundConstraints(date_from=lo, date_to=hi)) == (lo.timestamp(), hi.timestamp(), 2019, 2021)
    assert date_bounds(BoundConstraints(date_from=lo)) == (lo.timestamp(), 1e18, 2019, 9999)
    assert date_bounds(BoundConstraints(date_to=hi)) == (-1e18, hi.timestamp(), 0, 2021)
    assert filter_sql(BoundConstraints(date_to=hi))[1] == [-1e18, hi.timestamp(), 0, 2021]


def test_deep_fill_appends_unseen_rows_up_to_top_k() -> None:
    """Preferred rows come first; the fallback adds only rows not already in, up to top_k."""
    assert deep_fill([("b",), ("d",)], [("a",), ("b",), ("c",), ("d",)], 3) == [("b",), ("d",), ("a",)]


def test_non_increasing_caps_by_running_minimum() -> None:
    """A score after a lower one is capped to it."""
    assert non_increasing([3.0, 1.0, 2.0, 0.5]) == [3.0, 1.0, 1.0, 0.5]


def _old_home(path: Path, signed: list[int | None]) -> None:
    """A ``chunks`` table as homes were written before one SimHash codec: ``simhash INTEGER``, signed values."""
    conn = sqlite3.connect(path)
    conn.executescript(CHUNKS_DDL.replace("simhash TEXT", "simhash INTEGER"))
    with conn:
        for i, sig in enumerate(signed):
            conn.execute(
                "INSERT INTO chunks (id, doc_id, chunk_id, title, text, url, domain, published_at, years, source_kind,"
                " source_ref, trust, quality, metadata, simhash) VALUES (?, ?, ?, 'T', 'x', '', '', NULL, '[]',"
                " 'import', 'test', 'untrusted', 0.5, '{}', ?)",
                (f"c{i}", f"c{i}", f"c{i}", sig),
            )
    conn.close()


def _read(db: SqliteDb) -> list[int | None]:
    rows = db.conn().execute(f"SELECT {CHUNK_COLUMNS} FROM chunks ORDER BY id").fetchall()
    return [row_hit(r, rank=1, score=0.0).simhash for r in rows]


class TestSimhashColumn:
    def test_old_signed_integer_home_is_migrated_on_open(self, tmp_path: Path) -> None:
        """A home with the former signed INTEGER column reads back the same unsigned SimHashes, now as hex text."""
        values = [0, 4837, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, None]
        _old_home(tmp_path / "s.sqlite", [None if v is None else v - (1 << 64) if v >= 1 << 63 else v for v in values])
        db = SqliteDb(tmp_path / "s.sqlite", CHUNKS_DDL)
        try:
            assert _read(db) == values
            conn = db.conn()
            kinds = {row[1]: row[2] for row in conn.execute("PRAGMA table_info(chunks)")}
            assert kinds["simhash"] == "TEXT"
            assert "simhash_signed" not in kinds
            stored = [r[0] for r in conn.execute("SELECT simhash FROM chunks ORDER BY id")]
            assert stored == [to_stored_simhash(v) for v in values]
        finally:
            db.close()
        again = SqliteDb(tmp_path / "s.sqlite", CHUNKS_DDL)  # opened again: nothing left to migrate
        try:
            assert _read(again) == values
        finally:
            again.close()

    def test_hex_that_reads_as_a_number_stays_text(self, tmp_path: Path) -> None:
        """``'00000000000012e5'`` is kept as text in the column (INTEGER affinity would make it 1200000)."""
        db = SqliteDb(tmp_path / "n.sqlite", CHUNKS_DDL)
        try:
            values = list(chunk_row(chunk("a", "some words here")))  # a real row, with a chosen SimHash
            values[CHUNK_COLUMNS.split(", ").index("simhash")] = to_stored_simhash(4837)
            marks = ", ".join("?" * N_CHUNK_COLUMNS)
            with db.conn() as conn:
                conn.execute(f"INSERT INTO chunks ({CHUNK_COLUMNS}) VALUES ({marks})", values)
            assert db.conn().execute("SELECT typeof(simhash), simhash FROM chunks").fetchone() == (
                "text",
                "00000000000012e5",
            )
            assert _read(db) == [4837]
        finally:
            db.close()


class TestCloseWaitsForCallsInFlight:
    async def test_a_cancelled_callers_statement_finishes_before_the_connections_close(self, tmp_path: Path) -> None:
        """A caller cancelled while its call runs (a lane past its budget, an ingest stopped at shutdown) leaves
        the thread on its connection: ``close`` waits for it instead of closing the connection under a running
        statement (which crashes the interpreter), and the row it wrote is committed."""
        db = SqliteDb(tmp_path / "w.sqlite", CHUNKS_DDL)
        started, release = threading.Event(), threading.Event()
        marks = ", ".join("?" * N_CHUNK_COLUMNS)

        def write(conn: sqlite3.Connection) -> None:
            started.set()
            release.wait()
            with conn:
                conn.execute(f"INSERT INTO chunks ({CHUNK_COLUMNS}) VALUES ({marks})", chunk_row(chunk("a", "text")))

        caller = asyncio.create_task(db.run(write))
        waiting = asyncio.ensure_future(asyncio.to_thread(started.wait, 30.0))
        await asyncio.wait({caller, waiting}, return_when=asyncio.FIRST_COMPLETED)
        assert started.is_set()
        assert not caller.done()
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        closing = asyncio.create_task(db.aclose())
        await asyncio.sleep(0.1)
        assert not closing.done()  # still waiting for the write
        release.set()
        await closing
        reader = sqlite3.connect(tmp_path / "w.sqlite")
        assert reader.execute("SELECT id FROM chunks").fetchall() == [("a",)]
        reader.close()

    async def test_a_call_after_close_opens_a_new_connection(self, tmp_path: Path) -> None:
        """``close`` ends the connections it opened; the next call works on a new one."""
        db = SqliteDb(tmp_path / "r.sqlite", CHUNKS_DDL)
        first = await db.run(lambda conn: conn)
        await db.aclose()
        with pytest.raises(sqlite3.ProgrammingError):
            first.execute("SELECT 1")
        assert await db.run(lambda conn: conn.execute("SELECT count(*) FROM chunks").fetchone()) == (0,)
        db.close()
