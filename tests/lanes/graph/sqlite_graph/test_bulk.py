"""Batched graph writes: the same rows, entity ids included, as writing chunk by chunk (real SQLite)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import lanes.graph.sqlite_graph.bulk as mod
from lanes.graph._extract.entities import Extraction, RuleExtractor
from lanes.graph.sqlite_graph.tables import GRAPH_SCHEMA

TEXTS = [
    "Vitamin D reduces fracture risk in Older Adults. Vitamin D is inhibited by Calcitriol.",
    "Marie Curie worked with Pierre Curie in Paris on radioactive decay.",
    "IL-6 increases inflammation. Tumour necrosis factor and IL-6 were measured in blood samples.",
    "Pierre Curie studied piezoelectricity and radioactive decay in Paris.",
]


def _db(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.executescript(GRAPH_SCHEMA)
    return conn


def _chunk_by_chunk(conn: sqlite3.Connection, extractions: list[tuple[str, Extraction]]) -> None:
    """The writer before batching: three statements and one lookup per chunk."""
    for chunk_id, ex in extractions:
        conn.executemany("INSERT OR IGNORE INTO entities (norm, label) VALUES (?, ?)", list(ex.entities.items()))
        eid = dict(conn.execute(f"SELECT norm, id FROM entities WHERE norm IN ({','.join('?' * len(ex.entities))})",
                                list(ex.entities)))  # fmt: skip
        conn.executemany("INSERT OR IGNORE INTO mentions VALUES (?, ?)", [(eid[n], chunk_id) for n in ex.entities])
        conn.executemany(
            "INSERT OR IGNORE INTO relations VALUES (?, ?, ?, ?)",
            [(eid[s], p, eid[o], chunk_id) for s, p, o in ex.relations if s in eid and o in eid],
        )


def _dump(conn: sqlite3.Connection) -> list[list[tuple[object, ...]]]:
    return [
        conn.execute("SELECT * FROM entities ORDER BY id").fetchall(),
        conn.execute("SELECT * FROM mentions ORDER BY 1, 2").fetchall(),
        conn.execute("SELECT * FROM relations ORDER BY 1, 2, 3, 4").fetchall(),
    ]


def test_batch_writes_the_rows_of_chunk_by_chunk(tmp_path: Path) -> None:
    """Two batches (the second repeating entities of the first) give identical tables, ids included."""
    ex = RuleExtractor()
    extractions = [(f"c{i}", ex.extract(t)) for i, t in enumerate(TEXTS)]
    extractions.append(("c9", Extraction(entities={"x": "X"}, relations=[("x", "co_occurs", "missing")])))
    ref, new = _db(tmp_path / "ref.sqlite"), _db(tmp_path / "new.sqlite")
    _chunk_by_chunk(ref, extractions)
    mod.write_extractions(new, extractions[:2])
    mod.write_extractions(new, extractions[2:])
    assert _dump(new) == _dump(ref)
    assert len(_dump(new)[2]) > 10  # relations were written, not just entities


def test_entity_ids_reads_in_slices(tmp_path: Path, monkeypatch) -> None:
    """Lookups wider than one slice still find every stored name and skip unknown ones."""
    monkeypatch.setattr(mod, "SLICE", 2)
    conn = _db(tmp_path / "g.sqlite")
    conn.executemany("INSERT INTO entities (norm, label) VALUES (?, ?)", [(n, n.upper()) for n in "abcde"])
    assert mod.entity_ids(conn, ["e", "a", "zz", "c", "a"]) == {"e": 5, "a": 1, "c": 3}


def test_public_api() -> None:
    """The module exports the batch writer, the id lookup and the slice size."""
    assert set(mod.__all__) == {"SLICE", "entity_ids", "write_extractions"}
