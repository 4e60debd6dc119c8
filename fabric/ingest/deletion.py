"""Delete entries from every store: by entry id or by source, write-ahead through the ledger, audited.

``DELETE /v1/entries/{id}``, ``DELETE /v1/entries?source=...`` and ``fabric delete`` call :func:`delete_entries`:

1. the ledger names the chunks: an id matches a chunk id or an entry's doc id (a Markdown file's chunks share
   one), a source matches the ledger's source as clients see it (``api`` for every entry list posted to the
   service, ``<format>:<file name>``; :func:`fabric.ingest.pipeline.public_source`), the raw ledger source, or a
   path that resolves to it;
2. they are marked ``pending`` deletes in the ledger (write-ahead), then every store writer deletes them (all
   writers, not only those the ledger lists: a stale copy goes too), the graph with its triples and edges;
   With ``tenant`` given (the service passes the caller's), chunks whose latest audited write belongs to
   another tenant are left alone and not reported (so ids of other tenants are not disclosed either). A writer
   key may delete only what writer keys wrote untrusted (:mod:`fabric.ingest.provenance`): when any matched chunk
   is protected, the whole delete is refused (:class:`~fabric.ingest.provenance.ProvenanceError`, HTTP 403) and
   nothing is deleted (a source mixing a writer's and an admin's entries, like ``api``, is deleted by id);
3. when every store succeeded the ledger forgets them (a protected chunk leaves a tombstone of who held it) and
   the audit history records each entry and triple deleted (as the current :class:`~fabric.ingest.audit.Actor`). A
   store that failed leaves the rows pending and the report says which: repeating the delete finishes it.

Deleting chunks of a file-backed source removes them until that source is ingested again (the file still holds
them); entries posted to the service stay deleted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabric.core.chunks import StoreWriter
from fabric.core.errors import FabricError, IngestError
from fabric.core.logs import get_logger
from fabric.ingest.audit import AuditLog, EntryChange, current_actor
from fabric.ingest.audit_trail import graph_triples, record_changes, triple_changes
from fabric.ingest.conflicts import public_source
from fabric.ingest.ledger import LEDGER_FILE, Ledger, LedgerEntry
from fabric.ingest.provenance import check_writable

__all__ = ["DeleteReport", "NothingToDelete", "delete_entries", "matching_sources"]

log = get_logger(__name__)

_SHOWN_IDS = 1000


class NothingToDelete(IngestError):
    """No stored chunk matches the ids or the source (HTTP 404)."""

    status = 404

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass
class DeleteReport:
    """What one delete did."""

    matched: int = 0
    deleted: int = 0
    ids: list[str] = field(default_factory=list)
    stores: dict[str, str] = field(default_factory=dict)
    audited: int = 0

    @property
    def ok(self) -> bool:
        """Every store took the delete."""
        return all(v == "ok" for v in self.stores.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (at most 1000 ids listed; ``ids_truncated`` says when more were deleted)."""
        return {
            "matched": self.matched,
            "deleted": self.deleted,
            "ids": self.ids[:_SHOWN_IDS],
            "ids_truncated": len(self.ids) > _SHOWN_IDS,
            "stores": dict(self.stores),
            "audited": self.audited,
        }


def matching_sources(known: Sequence[str], wanted: str, home: Path) -> list[str]:
    """The ledger sources among ``known`` that ``wanted`` names (public form, raw form, or a path)."""
    wanted = wanted.strip()
    path: str | None = None
    if wanted and ":" not in wanted:
        try:
            path = str(Path(wanted).expanduser().resolve())
        except (OSError, RuntimeError):
            path = None
    out = []
    for src in known:
        raw_path = src.partition(":")[2]
        if src == wanted or public_source(src, home) == wanted or (path is not None and raw_path == path):
            out.append(src)
    return out


async def _write(writer: StoreWriter, ids: list[str]) -> str:
    try:
        await writer.open()
        await writer.delete(ids)
    except (FabricError, OSError) as exc:
        log.warning("delete_store_failed", store=writer.store, error=str(exc))
        return f"error: {exc}"
    return "ok"


def _foreign(home: Path, entries: list[LedgerEntry], tenant: str) -> set[str]:
    """Ids among ``entries`` whose latest audited write is another tenant's."""
    audit = AuditLog(home)
    try:
        owners = audit.owners([e.id for e in entries])
    finally:
        audit.close()
    return {i for i, owner in owners.items() if owner != tenant}


async def delete_entries(
    home: Path,
    writers: Sequence[StoreWriter],
    *,
    ids: Sequence[str] = (),
    source: str | None = None,
    tenant: str | None = None,
) -> DeleteReport:
    """Delete the chunks of ``ids`` and/or ``source`` from every store; see the module docstring.

    Raises:
        NothingToDelete: nothing stored matches (the field named: ``id`` or ``source``).
        ProvenanceError: the current actor is a writer key and some matched chunk is protected (nothing deleted).
        IngestError: neither ids nor a source given.
    """
    if not ids and not source:
        raise IngestError("delete: give entry ids or a source")
    ledger = await asyncio.to_thread(Ledger, home / LEDGER_FILE)
    try:
        sources = matching_sources(await asyncio.to_thread(ledger.sources), source, home) if source else []
        entries: list[LedgerEntry] = await asyncio.to_thread(ledger.matching, list(ids), sources)
        if tenant is not None and entries:
            foreign = await asyncio.to_thread(_foreign, home, entries, tenant)
            entries = [e for e in entries if e.id not in foreign]
        if not entries:
            what = ("source", f"no stored entries from source {source!r}") if source and not ids else None
            field_, message = what or ("id", f"no stored entry with id {', '.join(map(repr, ids[:5]))}")
            raise NothingToDelete(field_, message)
        by = "source" if source and not ids else "id"
        check_writable(current_actor().role, {e.id: e.provenance for e in entries}, "delete", by)
        chunk_ids = [e.id for e in entries]
        report = DeleteReport(matched=len(entries), ids=chunk_ids)
        await asyncio.to_thread(ledger.mark_pending, [], chunk_ids)
        before = await graph_triples(writers, chunk_ids)
        results = await asyncio.gather(*(_write(w, chunk_ids) for w in writers))
        report.stores = {w.store: r for w, r in zip(writers, results, strict=True)}
        if report.ok:
            report.deleted = await asyncio.to_thread(ledger.remove, entries, report.stores)
            after: dict[str, set[tuple[str, str, str]]] | None = {} if before is not None else None
            changes = [EntryChange("deleted", e.id, e.doc_id, public_source(e.source, home), e.content_hash)
                       for e in entries]  # fmt: skip
            report.audited = await record_changes(home, changes, triple_changes(before, after, chunk_ids), {})
    finally:
        await asyncio.to_thread(ledger.close)
    log.info("entries_deleted", matched=report.matched, deleted=report.deleted, ok=report.ok)
    return report
