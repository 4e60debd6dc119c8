"""Write authority by provenance: who may replace or delete what another role wrote.

Every chunk the ledger holds records who wrote it (:class:`Provenance`): the writer's ``role`` (``operator``, the
local operator: the CLI, the Python API, MCP over stdio; ``admin`` or ``writer``, an API key's role; open mode is
``admin``), its ``key_id``, and whether the content is ``trusted`` (``trust: trusted`` or ``source_kind:
operator``, which only the operator and admin keys may set). The rule, enforced by the ingestion pipeline and by
deletes whatever the door (HTTP, MCP, task worker):

- the operator and admin keys may write and delete anything;
- a writer key may replace or delete only what a writer key wrote (any writer key of its tenant) that is not
  trusted. Everything else is *protected*: written by the operator or an admin, marked trusted, or of unknown
  provenance (a row of a ledger from before provenance was recorded: refused rather than guessed). A refusal is
  :class:`ProvenanceError` (HTTP ``403``, an MCP tool error) and nothing is written: trust is never downgraded by
  a replacement;
- provenance survives a delete: removing a protected chunk (a delete, a source that no longer yields it, a repair
  rolling back an interrupted write) leaves a *tombstone* in the ledger (id → who owned it), so a writer cannot
  delete-then-repost, nor post the ids of an entry an admin removed. The operator or an admin writing the id again
  clears its tombstone. Tombstones are kept for protected chunks only (a writer's own ids stay free once deleted)
  and never expire: an id the operator once held is the operator's to give back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fabric.core.chunks import Chunk
from fabric.core.errors import IngestError
from fabric.core.vocabulary import SourceKind, Trust

__all__ = [
    "OPERATOR",
    "PRIVILEGED",
    "WRITER",
    "Provenance",
    "ProvenanceError",
    "check_writable",
    "chunk_trusted",
]

OPERATOR = "operator"
"""The role of the local operator (the CLI, the Python API, MCP over stdio): the default actor's."""
WRITER = "writer"
"""The role of a ``writer`` API key: it writes untrusted imports and may change only writers' untrusted content."""
PRIVILEGED = frozenset({OPERATOR, "admin"})
"""Roles that may replace and delete anything."""

_SHOWN = 20
"""Protected ids a refusal lists (the message names the first)."""


@dataclass(frozen=True, slots=True)
class Provenance:
    """Who wrote one stored chunk."""

    role: str | None
    """``operator``, ``admin`` or ``writer``; None when unknown (a ledger row from before provenance was kept)."""
    key_id: str | None = None
    """The writing API key's id (the operator's or open mode's as the audit history names it)."""
    trusted: bool = False
    """The content is marked ``trust: trusted`` or ``source_kind: operator``."""

    @property
    def protected(self) -> bool:
        """Whether only the operator or an admin key may replace or delete it."""
        return self.trusted or self.role != WRITER

    def owner(self) -> str:
        """Who holds the chunk, as a refusal names it."""
        if self.role == WRITER:
            return "trusted content" if self.trusted else "a writer key"
        if self.role is None:
            return "unknown provenance (treated as the operator's)"
        return "the operator" if self.role == OPERATOR else "an admin key"


class ProvenanceError(IngestError):
    """A writer key tried to replace or delete protected chunks; nothing was written (HTTP 403).

    Args:
        action: ``replace`` or ``delete``.
        protected: each refused id with its provenance (ledger row or tombstone).
        field: the request field at fault (``id``, ``source``, ``entries``).
    """

    status = 403

    def __init__(self, action: str, protected: Mapping[str, Provenance], field: str = "id") -> None:
        self.action = action
        self.field = field
        self.protected = {i: protected[i].owner() for i in sorted(protected)}
        first, owner = next(iter(self.protected.items()))
        more = f" (and {len(protected) - 1} more)" if len(protected) > 1 else ""
        super().__init__(
            f"entry {first!r} was written by {owner}{more}: a writer key may not {action} an entry the operator or "
            "an admin key wrote, or one marked trusted (even after it was deleted); only an admin key may"
        )

    def shown(self) -> dict[str, str]:
        """The first refused ids with who holds them (for the error body)."""
        return dict(list(self.protected.items())[:_SHOWN])


def chunk_trusted(chunk: Chunk) -> bool:
    """Whether a chunk claims operator trust (``trust: trusted`` or ``source_kind: operator``)."""
    return chunk.trust is Trust.TRUSTED or chunk.source_kind is SourceKind.OPERATOR


def check_writable(role: str, held: Mapping[str, Provenance], action: str, field: str = "id") -> None:
    """Refuse ``role`` changing any of ``held`` (id → provenance of what is stored, or of its tombstone).

    Raises:
        ProvenanceError: ``role`` is a writer and some of ``held`` is protected.
    """
    if role in PRIVILEGED:
        return
    refused = {i: p for i, p in held.items() if p.protected}
    if refused:
        raise ProvenanceError(action, refused, field)
