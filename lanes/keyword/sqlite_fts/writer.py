"""SQLite FTS5 keyword store: schema, path resolution and the store writer used by ingestion.

The file is ``<home>/keyword.sqlite`` unless ``options.path`` is set. ``chunks`` holds the payload and
``chunks_fts`` (external content, porter stemming over unicode61) indexes ``title`` and ``text``; triggers keep
the two in step, so an upsert is a plain ``INSERT ... ON CONFLICT`` on ``chunks``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from fabric.core.chunks import Chunk
from fabric.core.tenants import store_path
from lanes.base import LaneResources, LaneSpec
from lanes.sqlite_common import CHUNK_COLUMNS, CHUNKS_DDL, SqliteDb, chunk_row

__all__ = ["FTS_SCHEMA", "SqliteFtsWriter", "fts_path"]

FTS_SCHEMA = (
    CHUNKS_DDL
    + """
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    title, text, content='chunks', content_rowid='rowid', tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, title, text) VALUES (new.rowid, new.title, new.text);
END;
CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, title, text) VALUES ('delete', old.rowid, old.title, old.text);
END;
CREATE TRIGGER IF NOT EXISTS chunks_au AFTER UPDATE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, title, text) VALUES ('delete', old.rowid, old.title, old.text);
    INSERT INTO chunks_fts(rowid, title, text) VALUES (new.rowid, new.title, new.text);
END;
"""
)

_COLS = [c.strip() for c in CHUNK_COLUMNS.split(",")]
_UPSERT = (
    f"INSERT INTO chunks ({CHUNK_COLUMNS}) VALUES ({', '.join('?' * len(_COLS))}) "
    f"ON CONFLICT(id) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in _COLS[1:])}"
)


def fts_path(spec: LaneSpec, resources: LaneResources) -> Path:
    """Where the FTS5 database lives: ``options.path`` or ``<home>/keyword.sqlite`` (per tenant:
    :func:`fabric.core.tenants.store_path`)."""
    return store_path(spec.options.get("path"), resources.home / "keyword.sqlite", resources.tenant)


class SqliteFtsWriter:
    """Store writer of the FTS5 keyword store."""

    store = "sqlite_fts"
    needs_vectors = False

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        self.db = SqliteDb(fts_path(spec, resources), FTS_SCHEMA)

    async def open(self) -> None:
        """Create the tables if missing."""
        await self.db.run(lambda conn: None)

    async def upsert(self, chunks: Sequence[Chunk]) -> None:
        """Insert or replace ``chunks`` (payload and full-text index) in one transaction."""
        rows = [chunk_row(c) for c in chunks]

        def write(conn: sqlite3.Connection) -> None:
            with conn:
                conn.executemany(_UPSERT, rows)

        await self.db.run(write)

    async def delete(self, ids: Sequence[str]) -> None:
        """Delete chunks by id."""

        def write(conn: sqlite3.Connection) -> None:
            with conn:
                conn.executemany("DELETE FROM chunks WHERE id = ?", [(i,) for i in ids])

        await self.db.run(write)

    async def ids(self) -> set[str]:
        """Every chunk id the store holds (``fabric check``)."""
        return await self.db.run(lambda conn: {r[0] for r in conn.execute("SELECT id FROM chunks")})

    async def aclose(self) -> None:
        """Close the connections."""
        await self.db.aclose()
