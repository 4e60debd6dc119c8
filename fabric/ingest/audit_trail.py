"""What ingestion and deletion write to the audit history (:mod:`fabric.ingest.audit`): entry changes and triple diffs.

Triples are read from the graph store itself (a writer implementing :class:`~fabric.core.chunks.TripleReader`)
before and after a write, so the history records what the store really holds, whatever extractor produced it:
triples present after but not before are ``created``, those present before but not after ``deleted``. A graph
store that cannot be read leaves the triple part out (logged), never the write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from pathlib import Path

from fabric.core.chunks import StoreWriter, Triple, TripleReader
from fabric.core.errors import FabricError
from fabric.core.logs import get_logger
from fabric.ingest.audit import AuditLog, EntryChange, TripleChange, current_actor

__all__ = ["graph_triples", "record_changes", "triple_changes"]

log = get_logger(__name__)


async def graph_triples(writers: Sequence[StoreWriter], ids: Sequence[str]) -> dict[str, set[Triple]] | None:
    """The triples the graph stores hold for ``ids`` (union over graph writers); None when none can be read."""
    readers = [w for w in writers if isinstance(w, TripleReader)]
    if not readers or not ids:
        return {} if readers else None
    out: dict[str, set[Triple]] = {}
    for reader in readers:
        try:
            await reader.open()
            found = await reader.triples(ids)
        except (FabricError, OSError) as exc:
            log.warning("audit_triples_unreadable", store=getattr(reader, "store", "?"), error=str(exc))
            return None
        for chunk_id, triples in found.items():
            out.setdefault(chunk_id, set()).update(triples)
    return out


def triple_changes(
    before: dict[str, set[Triple]] | None, after: dict[str, set[Triple]] | None, ids: Iterable[str]
) -> list[TripleChange]:
    """Created and deleted triples of each chunk id (nothing when either side could not be read)."""
    if before is None or after is None:
        return []
    changes: list[TripleChange] = []
    empty: set[Triple] = set()
    for chunk_id in ids:
        old, new = before.get(chunk_id, empty), after.get(chunk_id, empty)
        created, deleted = (new - old if old else new), (old - new if new else old)
        if created:
            changes.append(TripleChange("created", chunk_id, tuple(sorted(created))))
        if deleted:
            changes.append(TripleChange("deleted", chunk_id, tuple(sorted(deleted))))
    return changes


async def record_changes(
    home: Path, entries: Sequence[EntryChange], triples: Sequence[TripleChange], docs: dict[str, tuple[str, str]]
) -> int:
    """Append the changes to ``home``'s audit history as the current actor; returns the rows written."""
    if not entries and not triples:
        return 0
    actor = current_actor()

    def write() -> int:
        audit = AuditLog(home)
        try:
            return audit.record(entries, triples, actor=actor, docs=docs)
        finally:
            audit.close()

    return await asyncio.to_thread(write)
