"""One stored entry by id, for the MCP resource template ``knowledge://entries/{entry_id}``.

The embedded SQLite stores (``sqlite_fts`` for the keyword lane, ``sqlite_graph`` for the graph lane) keep every
chunk's payload in a ``chunks`` table; the first configured store that has the id answers. Read-only: each read
opens its own ``mode=ro`` connection in a worker thread.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from fabric.core.models import iso_utc
from fabric.query.engine import Engine
from lanes.base import LaneResources, LaneSpec
from lanes.graph.sqlite_graph.tables import graph_path
from lanes.keyword.sqlite_fts.writer import fts_path
from lanes.sqlite_common import CHUNK_COLUMNS, row_hit

__all__ = ["read_entry"]

_STORES: dict[str, Callable[[LaneSpec, LaneResources], Path]] = {"sqlite_fts": fts_path, "sqlite_graph": graph_path}


def _paths(engine: Engine) -> list[Path]:
    resources = engine.resources or LaneResources(home=engine.settings.home)
    out: list[Path] = []
    for lc in engine.settings.lanes.values():
        where = _STORES.get(lc.backend)
        if where is not None:
            path = where(LaneSpec(name=lc.name, kind=lc.kind, backend=lc.backend, options=lc.options), resources)
            if path not in out:
                out.append(path)
    return out


def _lookup(paths: list[Path], entry_id: str) -> dict[str, Any] | None:
    for path in paths:
        if not path.is_file():
            continue
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = conn.execute(f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE id = ?", (entry_id,)).fetchone()
        except sqlite3.Error:
            row = None
        finally:
            conn.close()
        if row is not None:
            h = row_hit(row, rank=1, score=0.0)
            return {
                "id": h.id,
                "topic": h.title,
                "content": h.text,
                "url": h.url,
                "doc_id": h.doc_id,
                "published_at": iso_utc(h.published_at),
                "source_kind": h.source_kind.value,
                "source_ref": h.source_ref,
                "trust": h.trust.value,
            }
    return None


async def read_entry(engine: Engine, entry_id: str) -> dict[str, Any]:
    """The entry's JSON fields.

    Raises:
        ResourceNotFoundError: no store holds ``entry_id``.
    """
    found = await asyncio.to_thread(_lookup, _paths(engine), entry_id)
    if found is None:
        raise ResourceNotFoundError(f"unknown entry {entry_id!r}")
    return found
