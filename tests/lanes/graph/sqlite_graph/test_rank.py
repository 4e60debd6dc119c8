"""Ranking helpers of the graph lane: the ranking's head equals the full ranking's start; filtered reads."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import lanes.graph.sqlite_graph.rank as mod
from lanes.graph.sqlite_graph.tables import GRAPH_SCHEMA
from lanes.sqlite_common import chunk_row
from tests.support.embedded import chunk

SCORES = {"c5": 1.0, "c1": 3.0, "c4": 2.0, "c2": 2.0, "c3": 2.0, "c0": 0.5}
FULL = ["c1", "c2", "c3", "c4", "c5", "c0"]  # best first, ties by id


def _db(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.executescript(GRAPH_SCHEMA)
    years = {"c1": "in 1999", "c2": "in 2012", "c4": "in 2012", "c0": "in 2012"}
    conn.executemany(
        "INSERT INTO chunks VALUES (NULL, " + ", ".join("?" * 17) + ")",
        [chunk_row(chunk(c, f"text {years.get(c, '')}")) for c in SCORES],
    )
    return conn


def test_best_first_head_is_the_start_of_the_full_ranking() -> None:
    """The head holds every chunk scoring at least the k-th best score (all ties), in the full order."""
    assert mod.best_first(SCORES, len(SCORES)) == FULL
    assert mod.best_first(SCORES, 1) == ["c1"]
    assert mod.best_first(SCORES, 2) == FULL[:4]  # the 2nd best score is tied three ways
    assert mod.best_first(SCORES, 5) == FULL[:5]


def test_slices_read_top_k_first() -> None:
    """``[0, first)`` then slices of ``size``."""
    assert mod.slices(10, 3, size=4) == [(0, 3), (3, 7), (7, 10)]
    assert mod.slices(2, 5) == [(0, 2)]
    assert mod.slices(0, 5) == []


def test_first_passing_falls_back_to_the_whole_ranking(tmp_path: Path) -> None:
    """When the head has too few chunks passing the filter, the rest of the ranking is read, in order."""
    conn = _db(tmp_path / "g.sqlite")
    where = "c.text LIKE ?"
    rows = mod.first_passing(conn, SCORES, where, ["%2012%"], 3)
    assert [r[0] for r in rows] == ["c2", "c4", "c0"]
    assert [r[0] for r in mod.first_passing(conn, SCORES, "1", [], 2)] == ["c1", "c2"]


def test_provenance_of_returned_chunks() -> None:
    """Smallest hop count and the reached entities mentioning each returned chunk."""
    reached = {1: (0, "vitamin d", ["c1", "c2"]), 2: (1, "bone", ["c2", "c3"]), 3: (1, "calcium", ["c9"])}
    info = mod.provenance({"c2", "c3"}, reached)
    assert info["hops"] == {"c2": 0, "c3": 1}
    assert sorted(info["via"]["c2"]) == ["bone", "vitamin d"]
    assert info["via"]["c3"] == ["bone"]


def test_public_api() -> None:
    """The module exports its helpers."""
    assert set(mod.__all__) == {"best_first", "first_passing", "passing", "provenance", "slices"}
