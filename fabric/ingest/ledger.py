"""The ingestion ledger (``<home>/ledger.sqlite``): per chunk its content hash and the stores holding it,
plus an append-only audit history of creates, updates, deletes and repairs.

Write-ahead protocol used by :mod:`fabric.ingest.pipeline`: every chunk about to be written or deleted is first
marked ``pending`` (with its new hash); stores are written; then it is marked ``done`` with the stores that
succeeded. A run that dies in between leaves ``pending`` rows, and the next run rewrites (or re-deletes) them
in every store, so no chunk stays in one store and missing from another. ``fabric check --repair`` (and the
service at start-up, :mod:`fabric.ingest.check`) repairs without the source: it rolls pending writes back
(history ``rollback``), finishes pending deletes, and records chunks a store lost (history ``repair``).

Provenance (:mod:`fabric.ingest.provenance`): each row records who wrote the chunk (``role``, ``key_id``,
``trusted``), set with the write-ahead mark; a row of a ledger from before these columns has them NULL (unknown,
treated as the operator's). Removing or rolling back a protected chunk leaves a row in ``tombstones`` (id → who
held it) until the operator or an admin writes that id again.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from fabric.ingest.provenance import Provenance

__all__ = [
    "LEDGER_FILE",
    "Ledger",
    "LedgerEntry",
    "empty_tenant_notice",
    "stored_chunks",
]

LEDGER_FILE = "ledger.sqlite"
"""The ledger's file name under a home."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger (
    id TEXT PRIMARY KEY,
    doc_id TEXT NOT NULL,
    source TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    stores TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'done')),
    op TEXT NOT NULL CHECK (op IN ('upsert', 'delete')),
    updated_at TEXT NOT NULL,
    role TEXT,
    key_id TEXT,
    trusted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS ledger_source ON ledger(source);
CREATE TABLE IF NOT EXISTS tombstones (
    id TEXT PRIMARY KEY,
    doc_id TEXT NOT NULL,
    source TEXT NOT NULL,
    role TEXT,
    key_id TEXT,
    trusted INTEGER NOT NULL,
    deleted_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS history (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    ts TEXT NOT NULL,
    action TEXT NOT NULL,
    id TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    source TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    stores TEXT NOT NULL
);
"""
_PROVENANCE_COLUMNS = (("role", "TEXT"), ("key_id", "TEXT"), ("trusted", "INTEGER NOT NULL DEFAULT 0"))
"""Columns a ledger from before provenance lacks (added on open; its rows keep NULL: unknown)."""
_COLS = "id, doc_id, source, content_hash, stores, state, op, role, key_id, trusted"
"""The columns of a :class:`LedgerEntry`, in :func:`_entry`'s order."""


def empty_tenant_notice(home: Path, tenant: str) -> str | None:
    """What an empty answer means when ``tenant``'s home has nothing ingested (None when it has)."""
    if stored_chunks(home):
        return None
    return (
        f"tenant {tenant!r} has no ingested documents yet, so the embedded lanes have nothing to search; "
        f"add some with POST /v1/ingest (or `fabric ingest --tenant {tenant} PATH`)"
    )


def stored_chunks(home: Path) -> int:
    """How many chunks ingestion has written into ``home``'s stores (0 for a missing or never-ingested home).

    Reads the ledger without creating it: a search on an empty home must leave no files behind.
    """
    path = home / LEDGER_FILE
    if not path.is_file():
        return 0
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)
        try:
            row = conn.execute("SELECT count(*) FROM ledger WHERE state = 'done' AND op = 'upsert'").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:  # a ledger being created right now, or not a ledger: nothing ingested to count on
        return 0
    return int(row[0])


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_UNKNOWN = Provenance(None)


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """The ledger's view of one chunk."""

    id: str
    doc_id: str
    source: str
    content_hash: str
    stores: frozenset[str]
    state: str
    op: str
    provenance: Provenance = _UNKNOWN
    """Who wrote the chunk (:mod:`fabric.ingest.provenance`)."""


def _entry(row: Sequence[Any]) -> LedgerEntry:
    """A ledger row (:data:`_COLS`: id, doc_id, source, content_hash, stores JSON, state, op, provenance) as an
    entry."""
    prov = Provenance(row[7], row[8], bool(row[9]))
    return LedgerEntry(row[0], row[1], row[2], row[3], frozenset(json.loads(row[4])), row[5], row[6], prov)


P = ParamSpec("P")
R = TypeVar("R")


def _serialised(method: Callable[Concatenate[Ledger, P], R]) -> Callable[Concatenate[Ledger, P], R]:
    """``method`` under the ledger's lock: one call at a time on its connection, and :meth:`Ledger.close` waits
    for the one in flight (an ingest cancelled at shutdown closes the ledger while its thread may still write,
    and closing a connection under a running statement crashes the interpreter)."""

    @functools.wraps(method)
    def locked(self: Ledger, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock:
            return method(self, *args, **kwargs)

    return locked


class Ledger:
    """Synchronous ledger access (the pipeline calls it from worker threads; one lock serialises the calls)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(path, timeout=30.0, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.executescript(_SCHEMA)
        have = {r[1] for r in self.conn.execute("PRAGMA table_info(ledger)")}
        with self.conn:  # a ledger from before provenance: its rows keep NULL (unknown, protected)
            for name, decl in _PROVENANCE_COLUMNS:
                if name not in have:
                    self.conn.execute(f"ALTER TABLE ledger ADD COLUMN {name} {decl}")

    @_serialised
    def entries(self, source: str) -> dict[str, LedgerEntry]:
        """Every chunk the ledger holds for ``source``, by id."""
        rows = self.conn.execute(f"SELECT {_COLS} FROM ledger WHERE source = ?", (source,))
        return {r[0]: _entry(r) for r in rows}

    @_serialised
    def lookup(self, ids: Sequence[str]) -> dict[str, LedgerEntry]:
        """The ledger entries of ``ids`` (whatever their source), by id; unknown ids are left out."""
        found: dict[str, LedgerEntry] = {}
        for i in range(0, len(ids), 500):
            part = list(ids[i : i + 500])
            rows = self.conn.execute(f"SELECT {_COLS} FROM ledger WHERE id IN ({','.join('?' * len(part))})", part)
            found.update((r[0], _entry(r)) for r in rows)
        return found

    @_serialised
    def matching(self, ids: Sequence[str] = (), sources: Sequence[str] = ()) -> list[LedgerEntry]:
        """Chunks whose id or doc id is among ``ids``, or whose source is among ``sources`` (pending ones too)."""
        found: dict[str, LedgerEntry] = {}
        for values, where in ((list(ids), "id IN ({m}) OR doc_id IN ({m})"), (list(sources), "source IN ({m})")):
            for i in range(0, len(values), 400):
                part = values[i : i + 400]
                marks = ",".join("?" * len(part))
                sql = f"SELECT {_COLS} FROM ledger WHERE " + where.format(m=marks)
                args = part * where.count("{m}")
                for r in self.conn.execute(sql, args):
                    found[r[0]] = _entry(r)
        return sorted(found.values(), key=lambda e: e.id)

    @_serialised
    def sources(self) -> list[str]:
        """Every source the ledger holds chunks of."""
        return [r[0] for r in self.conn.execute("SELECT DISTINCT source FROM ledger ORDER BY source")]

    @_serialised
    def owners(self, ids: Sequence[str], source: str) -> dict[str, str]:
        """The ids among ``ids`` that the ledger holds for a source other than ``source``, with that source."""
        found: dict[str, str] = {}
        for i in range(0, len(ids), 500):
            part = list(ids[i : i + 500])
            marks = ",".join("?" * len(part))
            rows = self.conn.execute(
                f"SELECT id, source FROM ledger WHERE id IN ({marks}) AND source != ?",
                (*part, source),
            )
            found.update(dict(rows.fetchall()))
        return found

    @_serialised
    def provenance(self, ids: Sequence[str]) -> dict[str, Provenance]:
        """Who holds each of ``ids``: its ledger row's provenance, else its tombstone's (ids never held, or
        deleted while a writer's, are left out)."""
        found: dict[str, Provenance] = {}
        for table in ("tombstones", "ledger"):  # a live row wins over a tombstone
            for i in range(0, len(ids), 500):
                part = list(ids[i : i + 500])
                marks = ",".join("?" * len(part))
                rows = self.conn.execute(f"SELECT id, role, key_id, trusted FROM {table} WHERE id IN ({marks})", part)
                found.update((r[0], Provenance(r[1], r[2], bool(r[3]))) for r in rows)
        return found

    @_serialised
    def mark_pending(self, upserts: Sequence[tuple[str, str, str, str, Provenance]], deletes: Sequence[str]) -> None:
        """Write-ahead: ``(id, doc_id, source, new_hash, provenance)`` about to be written, ids about to be
        deleted."""
        now = _now()
        with self.conn:
            self.conn.executemany(
                "INSERT INTO ledger (id, doc_id, source, content_hash, stores, state, op, updated_at, role, key_id, "
                "trusted) VALUES (?, ?, ?, ?, '[]', 'pending', 'upsert', ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
                "doc_id = excluded.doc_id, source = excluded.source, content_hash = excluded.content_hash, "
                "state = 'pending', op = 'upsert', updated_at = excluded.updated_at, role = excluded.role, "
                "key_id = excluded.key_id, trusted = excluded.trusted",
                [(i, d, s, h, now, p.role, p.key_id, int(p.trusted)) for i, d, s, h, p in upserts],
            )
            self.conn.executemany(
                "UPDATE ledger SET state = 'pending', op = 'delete', updated_at = ? WHERE id = ?",
                [(now, i) for i in deletes],
            )

    @_serialised
    def mark_done(self, rows: Iterable[tuple[str, str, str, str, Iterable[str], str]]) -> int:
        """Record ``(id, doc_id, source, hash, stores, action)`` as written (clearing the ids' tombstones);
        ``action`` goes to the history."""
        now = _now()
        batch = [(i, d, s, h, json.dumps(sorted(set(st))), a) for i, d, s, h, st, a in rows]
        with self.conn:
            self.conn.executemany(
                "UPDATE ledger SET content_hash = ?, stores = ?, state = 'done', op = 'upsert', updated_at = ? "
                "WHERE id = ?",
                [(h, st, now, i) for i, _d, _s, h, st, _a in batch],
            )
            self.conn.executemany(
                "INSERT INTO history (ts, action, id, doc_id, source, content_hash, stores) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(now, a, i, d, s, h, st) for i, d, s, h, st, a in batch],
            )
            if self.conn.execute("SELECT 1 FROM tombstones LIMIT 1").fetchone():  # most homes hold none
                self.conn.executemany("DELETE FROM tombstones WHERE id = ?", [(i,) for i, *_ in batch])
        return len(batch)

    def _bury(self, entries: Sequence[LedgerEntry], now: str) -> None:
        """Tombstones for the protected ones of ``entries`` (inside the caller's transaction)."""
        self.conn.executemany(
            "INSERT OR REPLACE INTO tombstones (id, doc_id, source, role, key_id, trusted, deleted_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (e.id, e.doc_id, e.source, e.provenance.role, e.provenance.key_id, int(e.provenance.trusted), now)
                for e in entries
                if e.provenance.protected
            ],
        )

    @_serialised
    def remove(self, entries: Iterable[LedgerEntry], stores: Iterable[str]) -> int:
        """Forget deleted chunks (a tombstone keeps a protected one's provenance) and record ``delete`` in the
        history."""
        now = _now()
        gone = json.dumps(sorted(set(stores)))
        batch = list(entries)
        with self.conn:
            self.conn.executemany("DELETE FROM ledger WHERE id = ?", [(e.id,) for e in batch])
            self._bury(batch, now)
            self.conn.executemany(
                "INSERT INTO history (ts, action, id, doc_id, source, content_hash, stores) "
                "VALUES (?, 'delete', ?, ?, ?, ?, ?)",
                [(now, e.id, e.doc_id, e.source, e.content_hash, gone) for e in batch],
            )
        return len(batch)

    @_serialised
    def all_entries(self) -> list[LedgerEntry]:
        """Every chunk the ledger holds, of every source (``fabric check``)."""
        return [_entry(r) for r in self.conn.execute(f"SELECT {_COLS} FROM ledger")]

    @_serialised
    def roll_back(self, entries: Iterable[LedgerEntry]) -> int:
        """Forget chunks whose interrupted write was undone in every store (a tombstone keeps a protected one's
        provenance); ``rollback`` goes to the history."""
        now = _now()
        batch = list(entries)
        with self.conn:
            self.conn.executemany("DELETE FROM ledger WHERE id = ?", [(e.id,) for e in batch])
            self._bury(batch, now)
            self.conn.executemany(
                "INSERT INTO history (ts, action, id, doc_id, source, content_hash, stores) "
                "VALUES (?, 'rollback', ?, ?, ?, ?, '[]')",
                [(now, e.id, e.doc_id, e.source, e.content_hash) for e in batch],
            )
        return len(batch)

    @_serialised
    def set_stores(self, changes: Iterable[tuple[LedgerEntry, frozenset[str]]]) -> int:
        """Record that done chunks are held by exactly these stores (a repair found one missing)."""
        now = _now()
        batch = [(e, json.dumps(sorted(st))) for e, st in changes]
        with self.conn:
            self.conn.executemany(
                "UPDATE ledger SET stores = ?, updated_at = ? WHERE id = ?", [(st, now, e.id) for e, st in batch]
            )
            self.conn.executemany(
                "INSERT INTO history (ts, action, id, doc_id, source, content_hash, stores) "
                "VALUES (?, 'repair', ?, ?, ?, ?, ?)",
                [(now, e.id, e.doc_id, e.source, e.content_hash, st) for e, st in batch],
            )
        return len(batch)

    @_serialised
    def history(self, chunk_id: str | None = None) -> list[dict[str, str]]:
        """Audit rows, oldest first (optionally for one chunk)."""
        sql = "SELECT ts, action, id, doc_id, source, content_hash, stores FROM history"
        args: tuple[str, ...] = ()
        if chunk_id is not None:
            sql += " WHERE id = ?"
            args = (chunk_id,)
        keys = ("ts", "action", "id", "doc_id", "source", "content_hash", "stores")
        return [dict(zip(keys, r, strict=True)) for r in self.conn.execute(sql + " ORDER BY seq", args)]

    @_serialised
    def close(self) -> None:
        """Close the connection."""
        self.conn.close()
