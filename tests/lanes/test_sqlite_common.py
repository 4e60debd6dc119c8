"""Tests of the shared SQLite lane helpers: the soft year condition, deep fill and score capping."""

from __future__ import annotations

import sqlite3

from fabric.models import BoundConstraints
from lanes.sqlite_common import deep_fill, non_increasing, query_years_sql


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


def test_deep_fill_appends_unseen_rows_up_to_top_k() -> None:
    """Preferred rows come first; the fallback adds only rows not already in, up to top_k."""
    assert deep_fill([("b",), ("d",)], [("a",), ("b",), ("c",), ("d",)], 3) == [("b",), ("d",), ("a",)]


def test_non_increasing_caps_by_running_minimum() -> None:
    """A score after a lower one is capped to it."""
    assert non_increasing([3.0, 1.0, 2.0, 0.5]) == [3.0, 1.0, 1.0, 0.5]
