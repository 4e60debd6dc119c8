"""Ids are never overwritten across sources: the conflict an ingest refuses, and how a source is named to clients
(``api`` or ``<format>:<file name>``, never a server path)."""

from __future__ import annotations

from pathlib import Path

from fabric.core.errors import IngestError

__all__ = ["MAX_SHOWN_IDS", "IdConflictError", "public_source", "shown_source", "source_origin"]

MAX_SHOWN_IDS = 50
"""How many duplicate ids a report lists (the count covers all of them)."""


class IdConflictError(IngestError):
    """Ids the load yields that another source already holds; nothing was written.

    Args:
        taken: each conflicting id with the source holding it.
    """

    status = 409

    def __init__(self, taken: dict[str, str]) -> None:
        self.taken = dict(sorted(taken.items()))
        first, owner = next(iter(self.taken.items()))
        more = f" (and {len(taken) - 1} more)" if len(taken) > 1 else ""
        super().__init__(
            f"id {first!r} already exists for another source ({owner}){more}; ids are not overwritten across "
            "sources: rename the entry or remove it from its source first"
        )


def source_origin(source: str, home: Path) -> str:
    """Who owns a ledger source for the id-conflict rule: every entry list posted to the API is one origin
    (each is spooled to its own file); any other source is its own origin."""
    spool = f"jsonl:{(home / 'spool').resolve()}/"
    return "api" if source.startswith(spool) else source


def shown_source(source: str, home: Path) -> str:
    """A source as told to a client: ``api`` or ``<format>:<file name>`` (no server path)."""
    origin = source_origin(source, home)
    if origin == "api":
        return origin
    kind, _, rest = source.partition(":")
    return f"{kind}:{Path(rest).name}"


def public_source(source: str, home: Path) -> str:
    """A ledger source as clients see it (conflicts, audit records, deletes): ``api`` or ``<format>:<name>``."""
    return shown_source(source, home)
