"""The graph store's tables and one batch written into them, in the writer's thread or in the SQL process."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from fabric.core.tenants import store_path
from lanes.base import LaneResources, LaneSpec
from lanes.graph._extract.entities import Extraction
from lanes.graph.sqlite_graph.bulk import SLICE, write_extractions
from lanes.sqlite_common import CHUNK_COLUMNS, CHUNKS_DDL

__all__ = [
    "BUMP",
    "GRAPH_INDEXES",
    "GRAPH_SCHEMA",
    "GRAPH_TABLES",
    "TRIPLES_BY_CHUNK",
    "create_indexes",
    "existing_ids",
    "graph_path",
    "missing_indexes",
    "write_batch",
]

GRAPH_TABLES = (
    CHUNKS_DDL
    + """
CREATE TABLE IF NOT EXISTS entities (id INTEGER PRIMARY KEY, norm TEXT NOT NULL UNIQUE, label TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS aliases (alias TEXT PRIMARY KEY, canonical TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS relations (
    subject_id INTEGER NOT NULL, predicate TEXT NOT NULL, object_id INTEGER NOT NULL, chunk_id TEXT NOT NULL,
    PRIMARY KEY (subject_id, predicate, object_id, chunk_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS mentions (
    entity_id INTEGER NOT NULL, chunk_id TEXT NOT NULL, PRIMARY KEY (entity_id, chunk_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS graph_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
"""
)
GRAPH_INDEXES = {
    "relations_object": "CREATE INDEX IF NOT EXISTS relations_object ON relations(object_id);",
    "relations_chunk": "CREATE INDEX IF NOT EXISTS relations_chunk ON relations(chunk_id);",
    "mentions_chunk": "CREATE INDEX IF NOT EXISTS mentions_chunk ON mentions(chunk_id);",
}
"""The secondary indexes: the lane's reverse hops (``relations_object``), and deletes and the audit by chunk."""
BUMP = "INSERT INTO graph_meta (key, value) VALUES ('gen', 1) ON CONFLICT(key) DO UPDATE SET value = value + 1"
"""Run by every write of the graph inside its transaction: the lane's cache (:mod:`lanes.graph.sqlite_graph.cache`)
keeps
what it read for one generation only."""
GRAPH_SCHEMA = GRAPH_TABLES + "\n".join(GRAPH_INDEXES.values()) + "\n"
"""What the lane opens with (and what a writer leaves behind)."""

TRIPLES_BY_CHUNK = (
    "SELECT r.chunk_id, s.label, r.predicate, o.label FROM relations r "
    "JOIN entities s ON s.id = r.subject_id JOIN entities o ON o.id = r.object_id WHERE r.chunk_id IN ({marks})"
)
_COLS = [c.strip() for c in CHUNK_COLUMNS.split(",")]
_UPSERT = (
    f"INSERT INTO chunks ({CHUNK_COLUMNS}) VALUES ({', '.join('?' * len(_COLS))}) "
    f"ON CONFLICT(id) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in _COLS[1:])}"
)


def graph_path(spec: LaneSpec, resources: LaneResources) -> Path:
    """Where the graph database lives: ``options.path`` or ``<home>/graph.sqlite`` (per tenant:
    :func:`fabric.core.tenants.store_path`)."""
    return store_path(spec.options.get("path"), resources.home / "graph.sqlite", resources.tenant)


def existing_ids(conn: sqlite3.Connection, ids: Sequence[str]) -> list[str]:
    """The ids among ``ids`` that the store holds already."""
    out: list[str] = []
    for start in range(0, len(ids), SLICE):
        part = list(ids[start : start + SLICE])
        out += [r[0] for r in conn.execute(f"SELECT id FROM chunks WHERE id IN ({','.join('?' * len(part))})", part)]
    return out


def missing_indexes(conn: sqlite3.Connection) -> list[str]:
    have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    return [name for name in GRAPH_INDEXES if name not in have]


def create_indexes(conn: sqlite3.Connection) -> None:
    conn.executescript("\n".join(GRAPH_INDEXES.values()))


def write_batch(
    conn: sqlite3.Connection,
    rows: Sequence[tuple[Any, ...]],
    parts: Iterable[Sequence[tuple[str, Extraction]]],
    deferred: bool,
) -> bool:
    """Store one batch in one transaction: the ``chunks`` rows (:func:`~lanes.sqlite_common.chunk_row`), their
    old edges deleted, then each part of extractions as it comes. ``deferred``: the secondary indexes wait for the
    end of a bulk load (built here first if the batch re-writes a stored id). Returns whether they still wait.

    Run in the writer's thread, or in the SQL process (:mod:`lanes.graph.sqlite_graph.sql_process`): the same
    statements."""
    # a bigger page cache and fewer WAL checkpoints for this writer's connection: at 50K passages the B-tree
    # pages a batch touches are rewritten less often (3.6 GB written instead of 4.7; SQL CPU 18.1 -> 14.9 s)
    conn.execute("PRAGMA cache_size = -32768")
    conn.execute("PRAGMA wal_autocheckpoint = 20000")
    ids = [r[0] for r in rows]
    if deferred:  # without the chunk indexes a delete scans: delete only what is there (nothing, mostly)
        ids = existing_ids(conn, ids)
        if ids:
            create_indexes(conn)
            deferred = False
    with conn:
        gone = [(i,) for i in ids]
        conn.executemany("DELETE FROM mentions WHERE chunk_id = ?", gone)
        conn.executemany("DELETE FROM relations WHERE chunk_id = ?", gone)
        conn.executemany(_UPSERT, rows)
        for part in parts:
            write_extractions(conn, part)
        conn.execute(BUMP)
    return deferred
