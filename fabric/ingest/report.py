"""What an ingestion run reports: its progress as it goes (:class:`Progress`) and what it did
(:class:`IngestReport`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["IngestReport", "Progress"]


class Progress:
    """Progress sink: the CLI passes a rich-backed subclass; the default reports nothing."""

    def stage(self, name: str, total: int) -> None:
        """A stage with ``total`` units starts."""

    def advance(self, name: str, n: int) -> None:
        """``n`` more units of stage ``name`` are done."""


@dataclass
class IngestReport:
    """What one ingestion run did (the CLI prints it; ``--json`` emits :meth:`to_dict`)."""

    source: str
    format: str
    docs: int = 0
    chunks: int = 0
    created: int = 0
    updated: int = 0
    repaired: int = 0
    unchanged: int = 0
    deleted: int = 0
    pending: int = 0
    """Chunks some target store does not hold after this run (a store failed): the next run repairs them."""
    duplicates: int = 0
    """Entries superseded by a later entry with the same id in this load (last wins)."""
    duplicate_ids: list[str] = field(default_factory=list)
    """The repeated ids (sorted, the first :data:`MAX_SHOWN_IDS`)."""
    contended: int = 0
    audited: int = 0
    embedded: int = 0
    embeddings: str = "ok"
    stores: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    allowlist: dict[str, Any] | None = None
    """The allowlist that narrowed a folder walk: ``include``, ``exclude``, ``set_by``, files ``admitted`` and
    ``excluded``, the globs that matched no file (``unmatched``); None for BEIR and JSONL
    (:mod:`fabric.ingest.selection`)."""
    trust: dict[str, Any] | None = None
    """Documents per trust (``trusted``, ``untrusted``) and per deciding rule (``rules``)."""

    @property
    def failed_stores(self) -> dict[str, str]:
        """Stores that could not be written, with the error (empty when every store took its writes)."""
        return {k: v for k, v in sorted(self.stores.items()) if v != "ok"}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary with per-stage docs/s."""
        rates = {k: round(self.docs / v, 1) if v > 0 else None for k, v in self.seconds.items() if k != "total"}
        return {
            "source": self.source,
            "format": self.format,
            "docs": self.docs,
            "chunks": self.chunks,
            "created": self.created,
            "updated": self.updated,
            "repaired": self.repaired,
            "unchanged": self.unchanged,
            "deleted": self.deleted,
            "pending": self.pending,
            "duplicates": {"count": self.duplicates, "ids": list(self.duplicate_ids), "rule": "last-wins"},
            "contended": self.contended,
            "audited": self.audited,
            "embedded": self.embedded,
            "embeddings": self.embeddings,
            "stores": dict(self.stores),
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "docs_per_s": rates,
            "allowlist": self.allowlist,
            "trust": self.trust,
        }
