"""Store agreement: does every store hold exactly the chunks the ledger says it holds? (``fabric check``, and the
service at start-up.)

For each store that can list its ids (:class:`~fabric.core.chunks.ListableStore`: every store the project writes,
the embedded SQLite FTS5, flat vector and SQLite graph stores and the Qdrant, Meilisearch and ArangoDB servers) the
check compares the ids it holds with the ledger's ``done`` chunks recorded as held by that store: ``missing`` (the
ledger says held, the store lacks it) and ``extra`` (the store holds it, the ledger does not say so). Ledger rows
still ``pending`` are writes or deletes a crash interrupted. The stores *agree* when nothing is missing, extra or
pending. A writer that cannot list its ids (a third-party backend without ``ids()``) is named as unchecked.

Repair (``--repair``) makes the ledger and the stores agree again, from the ledger:

- an interrupted write (``pending`` upsert) is rolled back: the chunk is deleted from every store and forgotten
  by the ledger (history ``rollback``); ingesting its source again writes it afresh (the service resumes the
  interrupted task, which does exactly that). Its content is not trusted: a crash mid-update can leave the old
  version in one store and the new one in another;
- an interrupted delete (``pending`` delete) is finished in every store;
- an extra id is deleted from the store holding it;
- a ``done`` chunk missing from a store is recorded as not held there (history ``repair``): the ledger then
  agrees, and the next ingest of its source writes it to that store (the pipeline repairs chunks a target store
  lacks). The report lists those sources as ``incomplete``.

A store whose delete fails keeps its ledger rows pending, so a later check repairs it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabric.core.chunks import ListableStore, StoreWriter
from fabric.core.errors import FabricError
from fabric.core.logs import get_logger
from fabric.ingest.ledger import LEDGER_FILE, Ledger, LedgerEntry

__all__ = ["CheckReport", "StoreState", "check_stores", "pending_rows"]

log = get_logger(__name__)

_SAMPLE = 5
"""Ids shown per difference (the counts are complete)."""


@dataclass(slots=True)
class StoreState:
    """One store compared with the ledger."""

    store: str
    count: int
    """Ids the store holds."""
    expected: int
    """Ids the ledger records as held by the store."""
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with up to five ids of each difference."""
        return {
            "count": self.count,
            "expected": self.expected,
            "missing": len(self.missing),
            "extra": len(self.extra),
            "missing_ids": sorted(self.missing)[:_SAMPLE],
            "extra_ids": sorted(self.extra)[:_SAMPLE],
        }


@dataclass(slots=True)
class CheckReport:
    """The result of :func:`check_stores` (after the repair, when one ran)."""

    ledger: int
    """Chunks the ledger holds as done."""
    pending: int
    """Ledger rows a crash left pending (interrupted writes and deletes)."""
    stores: dict[str, StoreState]
    unchecked: list[str] = field(default_factory=list)
    """Stores that cannot list their ids."""
    incomplete: dict[str, int] = field(default_factory=dict)
    """Sources whose done chunks some store does not hold (re-ingest to complete), with the chunk count."""
    repaired: dict[str, int] | None = None
    """What a repair did (None when none ran)."""
    before: dict[str, Any] | None = None
    """The report before the repair (None when none ran)."""
    errors: dict[str, str] = field(default_factory=dict)
    """Stores that failed to list or repair, with the error."""

    @property
    def agree(self) -> bool:
        """No store misses or holds extra ids, nothing is pending, and no store failed."""
        diverged = any(s.missing or s.extra for s in self.stores.values())
        return not diverged and self.pending == 0 and not self.errors

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``fabric check --json``)."""
        out: dict[str, Any] = {
            "agree": self.agree,
            "ledger": self.ledger,
            "pending": self.pending,
            "stores": {name: s.to_dict() for name, s in self.stores.items()},
            "unchecked": list(self.unchecked),
            "incomplete": dict(self.incomplete),
            "errors": dict(self.errors),
        }
        if self.repaired is not None:
            out["repaired"] = dict(self.repaired)
            out["before"] = self.before
        return out


def pending_rows(home: Path) -> int:
    """Ledger rows a crash left pending (0 without a ledger); read-only, cheap enough before every ingest."""
    path = home / LEDGER_FILE
    if not path.is_file():
        return 0
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)
    try:
        return int(conn.execute("SELECT count(*) FROM ledger WHERE state = 'pending'").fetchone()[0])
    finally:
        conn.close()


def _read_ledger(home: Path, *, create: bool) -> list[LedgerEntry]:
    if not create and not (home / LEDGER_FILE).is_file():
        return []
    ledger = Ledger(home / LEDGER_FILE)
    try:
        return ledger.all_entries()
    finally:
        ledger.close()


async def _inventory(writers: Sequence[StoreWriter], report_errors: dict[str, str]) -> dict[str, set[str]]:
    held: dict[str, set[str]] = {}
    for w in writers:
        if not isinstance(w, ListableStore):
            continue
        try:
            held[w.store] = await w.ids()
        except (FabricError, OSError, Exception) as exc:  # any store failure is reported, never a traceback
            report_errors[w.store] = f"cannot list ids: {type(exc).__name__}: {exc}"
    return held


def _compare(
    rows: list[LedgerEntry],
    held: dict[str, set[str]],
    writers: Sequence[StoreWriter],
    errors: dict[str, str],
    vectors: bool,
) -> CheckReport:
    done = [r for r in rows if r.state == "done"]
    pending = {r.id for r in rows if r.state == "pending"}  # reported as pending, not as extra
    stores: dict[str, StoreState] = {}
    for name, ids in held.items():
        expected = {r.id for r in done if name in r.stores}
        stores[name] = StoreState(
            store=name,
            count=len(ids),
            expected=len(expected),
            missing=sorted(expected - ids),
            extra=sorted(ids - expected - pending),
        )
    all_stores = {w.store for w in writers if vectors or not w.needs_vectors}
    incomplete: dict[str, int] = {}
    for r in done:
        if r.stores and not all_stores <= r.stores:
            incomplete[r.source] = incomplete.get(r.source, 0) + 1
    return CheckReport(
        ledger=len(done),
        pending=len(rows) - len(done),
        stores=stores,
        unchecked=sorted(w.store for w in writers if not isinstance(w, ListableStore)),
        incomplete=incomplete,
        errors=dict(errors),
    )


async def _repair(
    home: Path, writers: Sequence[StoreWriter], rows: list[LedgerEntry], before: CheckReport, held: dict[str, set[str]]
) -> tuple[dict[str, int], dict[str, str]]:
    """Delete what must go from each store, then bring the ledger in line; counts and per-store errors."""
    pending = [r for r in rows if r.state == "pending"]
    pending_ids = {r.id for r in pending}
    failed: dict[str, str] = {}
    deleted = 0
    for w in writers:
        extra = set(before.stores[w.store].extra) if w.store in before.stores else set()
        # listable stores: delete only what they hold; others get every pending id (deletes are idempotent)
        doomed = (pending_ids & held[w.store]) | extra if w.store in held else pending_ids
        if not doomed:
            continue
        try:
            await w.open()
            await w.delete(sorted(doomed))
        except Exception as exc:  # a store that cannot be written: reported, its rows stay pending
            failed[w.store] = f"repair failed: {type(exc).__name__}: {exc}"
            log.warning("check_repair_store_failed", store=w.store, error=str(exc))
            continue
        deleted += len(doomed) if w.store not in held else len(doomed & held[w.store])
    missing = {name: set(s.missing) for name, s in before.stores.items()}
    downgrade = [
        (r, frozenset(st for st in r.stores if r.id not in missing.get(st, set())))
        for r in rows
        if r.state == "done" and any(r.id in missing.get(st, set()) for st in r.stores)
    ]
    counts = {"deleted_from_stores": deleted, "rolled_back": 0, "deletes_finished": 0, "marked_missing": 0}
    if failed:
        return counts, failed
    ledger = await asyncio.to_thread(Ledger, home / LEDGER_FILE)
    try:
        ups = [r for r in pending if r.op == "upsert"]
        dels = [r for r in pending if r.op == "delete"]
        counts["rolled_back"] = await asyncio.to_thread(ledger.roll_back, ups)
        counts["deletes_finished"] = await asyncio.to_thread(ledger.remove, dels, [w.store for w in writers])
        counts["marked_missing"] = await asyncio.to_thread(ledger.set_stores, downgrade)
    finally:
        await asyncio.to_thread(ledger.close)
    return counts, failed


async def check_stores(
    home: Path, writers: Sequence[StoreWriter], *, repair: bool = False, vectors: bool = True
) -> CheckReport:
    """Compare every listable store of ``writers`` with the ledger of ``home``; with ``repair``, make them agree.

    ``vectors``: whether an embedder is configured (without one, chunks missing from the stores that need vectors
    are not counted as incomplete: ingestion is lexical only).

    Never raises for a store failure: it is reported in :attr:`CheckReport.errors`.
    """
    errors: dict[str, str] = {}
    rows = await asyncio.to_thread(_read_ledger, home, create=False)
    held = await _inventory(writers, errors)
    report = _compare(rows, held, writers, errors, vectors)
    if not repair or (report.agree and not report.errors):
        return report
    counts, failed = await _repair(home, writers, rows, report, held)
    after_errors: dict[str, str] = dict(failed)
    rows = await asyncio.to_thread(_read_ledger, home, create=False)
    after = _compare(rows, await _inventory(writers, after_errors), writers, after_errors, vectors)
    after.repaired = counts
    after.before = report.to_dict()
    log.info("check_repaired", agree=after.agree, **counts)
    return after
