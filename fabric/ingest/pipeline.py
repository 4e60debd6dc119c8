"""The ingestion pipeline: load → chunk → embed → write every store, idempotently, with a ledger and audit.

For one source, each loaded chunk is compared with the ledger:

- new id → ``create``; changed content hash → ``update``; same hash but ``pending`` (an interrupted run) or
  missing from a store it belongs in (say, vectors skipped while embeddings were down) → ``repair``;
- unchanged and held by every target store → nothing is written;
- ids the ledger holds for this source that the load no longer yields → ``delete`` from every store;
- ids the ledger holds for another source → :class:`IdConflictError` before anything is written (ids are not
  namespaced by source, so BEIR and JSONL ids stay the ids clients cite; entry lists posted to the API count as
  one source among themselves, so a client may update its own entries: an id an earlier entry list wrote is
  compared with that list's ledger entry and reported ``updated`` or ``unchanged``, never ``created`` again);
- an id that occurs more than once in one load (two JSONL lines, two BEIR rows): **the last one wins**, and the
  report names them (``duplicates``: how many entries were superseded and which ids, the first
  :data:`MAX_SHOWN_IDS`), and a warning is logged; the file is not refused, since public corpora hold such repeats;
- chunks to write or delete that the actor may not change → :class:`~fabric.ingest.provenance.ProvenanceError`
  before anything is written (a writer key's run over what the operator or an admin key wrote, what is marked
  trusted, or the tombstone of either); every chunk written records the actor's role and key id.

Write-ahead: chunks to write or delete are marked ``pending`` first, then stores are written, then the ledger
records ``done`` with the stores that succeeded (and the audit history). A store that fails (a locked Qdrant
folder, a read-only or full disk) is reported in ``stores`` and the other stores still write; its chunks stay
unheld in the ledger (``pending`` in the report counts them) and the next run repairs them. Embeddings are
fail-open: without an embedder (or when it fails) the vector store is skipped and the report says so.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from fabric.core.chunks import Chunk, PrefetchingStore, StoreWriter
from fabric.core.errors import FabricError, LaneError
from fabric.core.logs import get_logger
from fabric.core.models import Embedder
from fabric.ingest.audit import EntryChange, current_actor
from fabric.ingest.audit_trail import graph_triples, record_changes, triple_changes
from fabric.ingest.conflicts import MAX_SHOWN_IDS, IdConflictError, shown_source, source_origin
from fabric.ingest.crashpoints import crash_point
from fabric.ingest.ledger import LEDGER_FILE, Ledger, LedgerEntry
from fabric.ingest.loaders import finalize_all, load_source
from fabric.ingest.privacy import WITHHELD, is_private, is_remote
from fabric.ingest.provenance import PRIVILEGED, Provenance, check_writable, chunk_trusted
from fabric.ingest.report import IngestReport, Progress
from fabric.ingest.selection import Selection, record_selection

__all__ = ["ingest"]

log = get_logger(__name__)

BATCH = 256
"""Chunks per embedding call and per store write."""


def _plan(
    chunks: Sequence[Chunk],
    entries: dict[str, LedgerEntry],
    adopted: dict[str, LedgerEntry],
    targets: dict[str, set[str]],
) -> tuple[list[tuple[Chunk, str, set[str]]], list[LedgerEntry], int]:
    """(chunk, action, stores to write) for every chunk needing work, entries to delete, unchanged count.

    ``entries`` are the source's own ledger entries (those the load no longer yields are deleted); ``adopted``
    are entries of the same ids under another source of the same origin (compared, never deleted).
    """
    todo: list[tuple[Chunk, str, set[str]]] = []
    unchanged = 0
    for c in chunks:
        want = targets[c.id]
        e = entries.get(c.id) or adopted.get(c.id)
        if e is None:
            todo.append((c, "create", want))
        elif e.content_hash != c.content_hash:
            todo.append((c, "update", want))
        elif e.state == "pending":
            todo.append((c, "repair", want))
        elif not want <= e.stores:
            todo.append((c, "repair", want - e.stores))
        else:
            unchanged += 1
    ids = {c.id for c in chunks}
    gone = [e for i, e in entries.items() if i not in ids]
    return todo, gone, unchanged


async def _embed(
    embedder: Embedder, chunks: list[Chunk], progress: Progress, report: IngestReport
) -> dict[str, tuple[float, ...]]:
    """Vectors by chunk id, embedded in length-sorted batches; empty (and reported) when embeddings fail."""
    order = sorted(chunks, key=lambda c: len(c.embed_text))
    progress.stage("embed", len(order))
    vectors: dict[str, tuple[float, ...]] = {}
    for start in range(0, len(order), BATCH):
        batch = order[start : start + BATCH]
        try:
            vecs = await asyncio.to_thread(_embed_batch, embedder, batch)
        except (LaneError, OSError) as exc:
            report.embeddings = f"unavailable: {exc}"
            log.warning("ingest_embeddings_unavailable", error=str(exc))
            return {}
        vectors.update(vecs)
        progress.advance("embed", len(batch))
        crash_point("embed")
    report.embedded = len(vectors)
    return vectors


def _embed_batch(embedder: Embedder, batch: list[Chunk]) -> list[tuple[str, tuple[float, ...]]]:
    """(id, vector) of each chunk of ``batch`` (in a worker thread: the tuples of floats are built there too)."""
    vecs = embedder.embed([c.embed_text for c in batch])
    return [(c.id, tuple(v)) for c, v in zip(batch, vecs, strict=True)]


async def _write(
    writer: StoreWriter, chunks: list[Chunk], gone: list[str], progress: Progress, report: IngestReport
) -> bool:
    """Write ``chunks`` and delete ``gone`` in one store; False (and reported) when the store failed."""
    t0 = time.perf_counter()
    try:
        await writer.open()
        for start in range(0, len(chunks), BATCH):
            if isinstance(writer, PrefetchingStore):
                writer.prefetch(chunks[start + BATCH : start + 2 * BATCH])
            await writer.upsert(chunks[start : start + BATCH])
            progress.advance("write", len(chunks[start : start + BATCH]))
            crash_point(f"write.{writer.store}")
        if gone:
            await writer.delete(gone)
    except (FabricError, OSError, sqlite3.Error) as exc:  # one store's failure: the others still write
        shown = str(exc) if isinstance(exc, FabricError) else f"{type(exc).__name__}: {exc}"
        report.stores[writer.store] = f"error: {shown}"
        log.warning("ingest_store_failed", store=writer.store, error=str(exc))
        return False
    report.stores[writer.store] = "ok"
    report.seconds[f"write.{writer.store}"] = time.perf_counter() - t0
    return True


async def _check_ids(ledger: Ledger, chunks: Sequence[Chunk], source: str, home: Path) -> dict[str, LedgerEntry]:
    """Raise :class:`IdConflictError` when a chunk id is held by another source (nothing is written then).

    Returns:
        The ledger entries of ids another source of the same origin holds (an earlier entry list posted to the
        API): this load updates them rather than creating them.
    """
    held = await asyncio.to_thread(ledger.owners, [c.id for c in chunks], source)
    taken = {i: s for i, s in held.items() if source_origin(s, home) != source_origin(source, home)}
    if taken:
        raise IdConflictError({i: shown_source(s, home) for i, s in taken.items()})
    return await asyncio.to_thread(ledger.lookup, list(held)) if held else {}


def _dedupe(chunks: Sequence[Chunk], report: IngestReport) -> list[Chunk]:
    """One chunk per id, the last occurrence winning (in first-occurrence order); repeats go to the report."""
    by_id: dict[str, Chunk] = {}
    repeats: dict[str, int] = {}
    for c in chunks:
        if c.id in by_id:
            repeats[c.id] = repeats.get(c.id, 0) + 1
        by_id[c.id] = c
    if repeats:
        report.duplicates = sum(repeats.values())
        report.duplicate_ids = sorted(repeats)[:MAX_SHOWN_IDS]
        log.warning("ingest_duplicate_ids", source=report.source, superseded=report.duplicates, ids=len(repeats))
    return list(by_id.values())


async def _mark_pending(
    ledger: Ledger,
    todo: Sequence[tuple[Chunk, str, set[str]]],
    gone: Sequence[LedgerEntry],
    source: str,
    entries: dict[str, LedgerEntry],
) -> None:
    """Record the chunks about to be written (as the current actor's; a repair keeps its provenance) and the entries
    about to be deleted as pending in the ledger, once the actor may change them all (a writer key's are read)."""
    who = current_actor()
    if who.role not in PRIVILEGED:  # ids held or tombstoned; the operator's and admins' runs read nothing
        check_writable(who.role, await asyncio.to_thread(ledger.provenance, [c.id for c, _, _ in todo]), "replace")
        check_writable(who.role, {e.id: e.provenance for e in gone}, "delete")
    rows = [
        (c.id, c.doc_id, source, c.content_hash, entries[c.id].provenance if action == "repair" else
         Provenance(who.role, who.key_id, chunk_trusted(c)))
        for c, action, _ in todo
    ]  # fmt: skip
    await asyncio.to_thread(ledger.mark_pending, rows, [e.id for e in gone])


async def ingest(
    path: Path,
    *,
    home: Path,
    writers: Sequence[StoreWriter],
    embedder: Embedder | None,
    fmt: str | None = None,
    progress: Progress | None = None,
    private_sources: Sequence[str] = (),
    selection: Selection | None = None,
) -> IngestReport:
    """Ingest ``path`` into every store of ``writers``; see the module docstring for the protocol.

    ``private_sources``: :mod:`fabric.ingest.privacy`; ``selection`` (allowlist, trust): :mod:`fabric.ingest.selection`.

    Raises:
        IngestError: the source cannot be read or parsed.
        IdConflictError: an id is already held by another source (nothing is written).
    """
    progress = progress or Progress()
    t0 = time.perf_counter()
    source, chunks, report = await _load(path, fmt, progress, selection)
    t2 = time.perf_counter()

    withheld = is_remote(embedder) and await asyncio.to_thread(is_private, path, private_sources)
    embedder = None if withheld else embedder
    ledger = await asyncio.to_thread(Ledger, home / LEDGER_FILE)
    try:
        if embedder is None:
            report.embeddings = WITHHELD if withheld else "disabled: no embedder (lexical only)"
        stored = _Store(ledger=ledger, source=source, home=home, writers=writers, progress=progress, report=report)
        await stored.run(chunks, embedder, since=t2)
        await asyncio.to_thread(record_selection, home / LEDGER_FILE, source, report.allowlist, report.trust)
    finally:
        await asyncio.to_thread(ledger.close)
    report.seconds["total"] = time.perf_counter() - t0
    log.info("ingest_finished", **{k: v for k, v in report.to_dict().items() if isinstance(v, int | str)})
    return report


async def _load(
    path: Path, fmt: str | None, progress: Progress, selection: Selection | None
) -> tuple[str, list[Chunk], IngestReport]:
    """Load and chunk ``path``: its source name, its chunks (duplicates counted in the report) and the report."""
    t0 = time.perf_counter()
    progress.stage("load", 1)
    loaded = await asyncio.to_thread(load_source, path, fmt, (selection or Selection()).for_role(current_actor().role))
    progress.advance("load", 1)
    report = IngestReport(loaded.source, loaded.fmt, loaded.docs, allowlist=loaded.allowlist, trust=loaded.trust)
    t1 = time.perf_counter()
    progress.stage("chunk", len(loaded.chunks))
    chunks = await asyncio.to_thread(lambda: _dedupe(finalize_all(loaded.chunks), report))
    progress.advance("chunk", len(chunks))
    report.chunks = len(chunks)
    report.seconds.update({"load": t1 - t0, "chunk": time.perf_counter() - t1})
    return loaded.source, chunks, report


@dataclass(slots=True, kw_only=True)
class _Store:
    """One source's chunks against the ledger: plan, embed, write every store, record, audit."""

    ledger: Ledger
    source: str
    home: Path
    writers: Sequence[StoreWriter]
    progress: Progress
    report: IngestReport

    async def run(self, chunks: list[Chunk], embedder: Embedder | None, *, since: float) -> None:
        """Store ``chunks`` (vectors from ``embedder`` when there is one); ``since`` starts the embed stage's time."""
        ledger, source, writers, report = self.ledger, self.source, self.writers, self.report
        all_stores = {w.store for w in writers}
        lexical = {w.store for w in writers if not w.needs_vectors}
        adopted = await _check_ids(ledger, chunks, source, self.home)
        entries = await asyncio.to_thread(ledger.entries, source)
        targets = {c.id: all_stores if embedder is not None else lexical for c in chunks}
        report.contended = sum(1 for e in entries.values() if e.state == "pending")
        todo, gone, report.unchanged = await asyncio.to_thread(_plan, chunks, entries, adopted, targets)
        entries |= adopted
        await _mark_pending(ledger, todo, gone, source, entries)
        touched = [c.id for c, action, _ in todo if action != "repair"] + [e.id for e in gone]
        ta = time.perf_counter()  # a created chunk had no triples: only updates and deletes are read before
        before = await graph_triples(
            writers, [c.id for c, action, _ in todo if action == "update"] + [e.id for e in gone]
        )
        audit_before = time.perf_counter() - ta

        vectors: dict[str, tuple[float, ...]] = {}
        need_vec = [c for c, _, st in todo if any(w.store in st and w.needs_vectors for w in writers)]
        if embedder is not None and need_vec:
            vectors = await _embed(embedder, need_vec, self.progress, report)
        t3 = time.perf_counter()

        held, deleted_ok = await _write_all(writers, todo, gone, entries, vectors, self.progress, report)
        t4 = time.perf_counter()

        crash_point("ledger")
        await asyncio.to_thread(lambda: ledger.mark_done(_done_rows(todo, entries, held, source, report)))
        if deleted_ok and gone:
            report.deleted = await asyncio.to_thread(ledger.remove, gone, all_stores)
        elif gone:
            report.pending += len(gone)
        ta = time.perf_counter()
        after = await graph_triples(writers, touched)
        report.audited = await _audit(self.home, source, todo, gone if deleted_ok else [], before, after)
        report.seconds.update({"embed": t3 - since - audit_before, "write": t4 - t3})
        report.seconds["audit"] = audit_before + time.perf_counter() - ta


async def _write_all(
    writers: Sequence[StoreWriter],
    todo: list[tuple[Chunk, str, set[str]]],
    gone: list[LedgerEntry],
    entries: dict[str, LedgerEntry],
    vectors: dict[str, tuple[float, ...]],
    progress: Progress,
    report: IngestReport,
) -> tuple[dict[str, set[str]], bool]:
    """Write every store concurrently; the stores now holding each chunk, and whether every store succeeded.

    What each store gets is worked out in a worker thread: for a large load it is tens of thousands of chunk
    copies, which would hold the event loop (and every search waiting on it) for hundreds of ms.
    """
    jobs = await asyncio.to_thread(_jobs, writers, todo, gone, entries, vectors)
    progress.stage("write", sum(len(mine) for _, mine, _ in jobs))
    held: dict[str, set[str]] = {c.id: set() for c, _, _ in todo}
    # stores are independent: write them concurrently (SQLite stores work in threads)
    tasks = [asyncio.ensure_future(_write(w, mine, dels, progress, report)) for w, mine, dels in jobs]
    try:
        oks = await asyncio.gather(*tasks)
    finally:  # one store's task cancelled (or failed): stop the others before the caller closes the writers
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
    for (w, mine, _), ok in zip(jobs, oks, strict=True):
        if ok:
            for c in mine:
                held[c.id].add(w.store)
    return held, all(oks)


def _jobs(
    writers: Sequence[StoreWriter],
    todo: list[tuple[Chunk, str, set[str]]],
    gone: list[LedgerEntry],
    entries: dict[str, LedgerEntry],
    vectors: dict[str, tuple[float, ...]],
) -> list[tuple[StoreWriter, list[Chunk], list[str]]]:
    """(writer, chunks to upsert, ids to delete) of every store."""
    jobs = []
    for w in writers:
        mine = [c for c, _, st in todo if w.store in st]
        if w.needs_vectors:
            mine = [replace(c, vector=vectors[c.id]) for c in mine if c.id in vectors]
        stale = [  # updated without this store (e.g. no embedder now): its old copy must go
            c.id
            for c, action, st in todo
            if action == "update" and w.store not in st and w.store in entries[c.id].stores
        ]
        jobs.append((w, mine, [e.id for e in gone] + stale))
    return jobs


def _done_rows(
    todo: list[tuple[Chunk, str, set[str]]],
    entries: dict[str, LedgerEntry],
    held: dict[str, set[str]],
    source: str,
    report: IngestReport,
) -> list[tuple[str, str, str, str, set[str] | frozenset[str], str]]:
    """The ledger's ``mark_done`` rows (a repair keeps the stores that already held the chunk); counts actions."""
    done: list[tuple[str, str, str, str, set[str] | frozenset[str], str]] = []
    for c, action, want in todo:
        before = entries[c.id].stores if c.id in entries and action == "repair" else frozenset()
        done.append((c.id, c.doc_id, source, c.content_hash, held[c.id] | before, action))
        report.pending += not want <= held[c.id] | before
        attr = {"create": "created", "update": "updated", "repair": "repaired"}[action]
        setattr(report, attr, getattr(report, attr) + 1)
    return done


async def _audit(
    home: Path,
    source: str,
    todo: list[tuple[Chunk, str, set[str]]],
    gone: list[LedgerEntry],
    before: dict[str, set[tuple[str, str, str]]] | None,
    after: dict[str, set[tuple[str, str, str]]] | None,
) -> int:
    """Record created, updated and deleted entries and their triples in the audit history (repairs change
    nothing a client sees, so they are not recorded)."""
    shown = shown_source(source, home)
    changes = [
        EntryChange(f"{action}d", c.id, c.doc_id, shown, c.content_hash) for c, action, _ in todo if action != "repair"
    ]
    changes += [EntryChange("deleted", e.id, e.doc_id, shown, e.content_hash) for e in gone]
    triples = triple_changes(before, after, [ch.entry_id for ch in changes])
    return await record_changes(home, changes, triples, {})
