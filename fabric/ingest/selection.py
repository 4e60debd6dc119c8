"""What a folder ingest reads and how far it trusts each file: the allowlist and the trust rules.

**Allowlist.** A Markdown folder (or file) is narrowed by path globs (:mod:`fabric.core.globs`, relative to the
ingested folder): with ``include`` globs a file is read only when one matches it; a file an ``exclude`` glob matches
is never read, even when included (an exclude beats an include). The lists come from ``[ingest] include`` /
``exclude``; ``fabric ingest --include/--exclude``, a ``{"path": ...}`` request's ``include`` / ``exclude`` and the
Python API's arguments replace them (each list on its own). Every ingest report names the effective allowlist and
where each list came from (``allowlist``: ``include``, ``exclude``, ``set_by``), with the files it admitted and
excluded and the globs that matched no file (``unmatched``); the ledger keeps it per source
(:func:`record_selection`), and the slow-cook receipt repeats it. When the allowlist admits none of the files of a
folder that holds some, the ingest is refused (:class:`~fabric.core.errors.IngestError`) before anything is written,
so a mistyped glob never empties a source. BEIR corpora and JSONL files are not folder walks: an explicit allowlist
for one is refused, the configured one does not apply (the report's ``allowlist`` is null).

**Trust.** Each Markdown file gets the trust of the first ``[ingest.trust] rules`` glob matching its relative path,
else ``[ingest.trust] default`` (``untrusted``: repository text is not trusted automatically; decision records,
operator roadmaps and specs are, by the shipped rules). A trusted file is operator content (``source_kind =
operator``), an untrusted one an import (``source_kind = import``). Front matter ``trust:`` / ``source_kind:``
overrides the rules when ``[ingest.trust] front_matter`` is on and the ingest runs as the operator or an admin key
(the roles that may set trust); ``source_kind: operator`` alone means trusted. The report counts each file's trust
under the rule that decided it (``trust``: per trust, per rule: the glob, ``default`` or ``front matter``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fabric.core.chunks import Chunk
from fabric.core.errors import IngestError
from fabric.core.globs import PathGlob
from fabric.core.models import SourceKind, Trust
from fabric.ingest.provenance import PRIVILEGED
from fabric.settings import IngestConfig, TrustConfig

__all__ = [
    "FRONT_MATTER",
    "Selection",
    "Tally",
    "entries_trust",
    "record_selection",
    "requested_selection",
    "requesting",
    "selection_for",
]

FRONT_MATTER = "front matter"
"""The rule a file's own front matter is counted under."""
DEFAULT_RULE = "default"
"""The rule of a file no glob matches."""


def _globs(values: Sequence[str], name: str) -> tuple[PathGlob, ...]:
    """Compiled globs of ``--include`` / ``--exclude``.

    Raises:
        IngestError: a glob :class:`~fabric.core.globs.PathGlob` refuses, naming the list.
    """
    out = []
    for value in values:
        try:
            out.append(PathGlob(str(value)))
        except ValueError as exc:
            raise IngestError(f"{name}: {exc}") from None
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Selection:
    """The allowlist and trust rules of one ingest (build it with :func:`selection_for`)."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    set_by: Mapping[str, str] = field(default_factory=lambda: {"include": "default", "exclude": "default"})
    """Where each list came from: ``cli``, ``request``, ``api``, ``config`` or ``default`` (none set)."""
    trust: TrustConfig = field(default_factory=TrustConfig)
    front_matter: bool = True
    """Whether front matter may override the rules (the config's switch and a role that may set trust)."""

    @property
    def explicit(self) -> bool:
        """Whether the caller (not the configuration) gave an allowlist."""
        return any(v not in ("config", "default") for v in self.set_by.values())

    def for_role(self, role: str) -> Selection:
        """This selection for an ingest run by ``role``: front matter is honoured for the operator and admin only."""
        return self if role in PRIVILEGED else replace(self, front_matter=False)

    def admitted(self, root: Path, files: Sequence[Path]) -> tuple[list[Path], Tally]:
        """The files under ``root`` the allowlist admits, and the tally the report is built from.

        Raises:
            IngestError: the allowlist admits none of ``files`` (naming the globs that matched nothing).
        """
        include, exclude = _globs(self.include, "include"), _globs(self.exclude, "exclude")
        tally = Tally(self)
        kept = []
        for file in files:
            rel = file.relative_to(root).as_posix()
            included = [g.glob for g in include if g.matches(rel)]
            excluded = [g.glob for g in exclude if g.matches(rel)]
            tally.matched.update(included + excluded)
            if (include and not included) or excluded:  # an exclude beats an include
                tally.excluded += 1
            else:
                kept.append(file)
        if files and not kept:
            raise IngestError(f"allowlist: admits none of the {len(files)} file(s) under {root}; {tally.describe()}")
        return kept, tally

    def decide(self, rel: str, meta: Mapping[str, Any], where: str) -> tuple[SourceKind, Trust, str]:
        """(source kind, trust, the rule that decided) of the file at ``rel`` with front matter ``meta``.

        Raises:
            IngestError: a front matter ``trust`` / ``source_kind`` value that is not one (naming file and field).
        """
        kind = trust = None
        if self.front_matter:
            kind = _enum(SourceKind, meta.get("source_kind"), f"{where}: source_kind")
            trust = _enum(Trust, meta.get("trust"), f"{where}: trust")
        if trust is None and kind is SourceKind.OPERATOR:
            trust = Trust.TRUSTED
        rule = FRONT_MATTER
        if trust is None:
            trust, rule = self._rule(rel)
        return kind or _kind_of(trust), trust, rule

    def _rule(self, rel: str) -> tuple[Trust, str]:
        for rule in self.trust.rules:
            if PathGlob(rule.glob).matches(rel):
                return rule.trust, rule.glob
        return self.trust.default, DEFAULT_RULE


def _kind_of(trust: Trust) -> SourceKind:
    return SourceKind.OPERATOR if trust is Trust.TRUSTED else SourceKind.IMPORT


def _enum(cls: Any, value: Any, where: str) -> Any:
    if value in (None, ""):
        return None
    try:
        return cls.from_str(str(value))
    except ValueError as exc:
        raise IngestError(f"{where}: {exc}") from None


@dataclass(slots=True)
class Tally:
    """What one folder walk admitted and trusted: the report's ``allowlist`` and ``trust`` sections."""

    selection: Selection
    excluded: int = 0
    matched: set[str] = field(default_factory=set)
    """Globs of the allowlist that matched at least one file."""
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Rule → ``{"trust": ..., "docs": n}``, in the order rules first decided a file."""

    def count(self, trust: Trust, rule: str) -> None:
        """One more file of ``trust``, decided by ``rule``."""
        row = self.rules.setdefault(f"{rule} ({trust.value})", {"rule": rule, "trust": trust.value, "docs": 0})
        row["docs"] += 1

    @property
    def unmatched(self) -> list[str]:
        """The allowlist's globs that matched no file (in the order given)."""
        return [g for g in (*self.selection.include, *self.selection.exclude) if g not in self.matched]

    def describe(self) -> str:
        """The allowlist in one line (an error message names it)."""
        sel = self.selection
        parts = [f"include {', '.join(sel.include)}" if sel.include else "include everything"]
        parts += [f"exclude {', '.join(sel.exclude)}"] if sel.exclude else []
        missed = self.unmatched
        return "; ".join(parts) + (f" ({', '.join(missed)} matched no file)" if missed else "")

    def allowlist(self, admitted: int) -> dict[str, Any]:
        """The report's ``allowlist`` section."""
        sel = self.selection
        return {
            "include": list(sel.include), "exclude": list(sel.exclude), "set_by": dict(sel.set_by),
            "admitted": admitted, "excluded": self.excluded, "unmatched": self.unmatched,
        }  # fmt: skip

    def trust(self) -> dict[str, Any]:
        """The report's ``trust`` section: files per trust, and per deciding rule."""
        totals = {t.value: 0 for t in Trust}
        for row in self.rules.values():
            totals[row["trust"]] += row["docs"]
        return {**totals, "rules": list(self.rules.values()), "front_matter": self.selection.front_matter}


def entries_trust(chunks: Sequence[Chunk], rule: str) -> dict[str, Any]:
    """The report's ``trust`` section of a BEIR or JSONL load: entries per trust, all decided by ``rule``."""
    tally = Tally(Selection(front_matter=False))
    for chunk in chunks:
        tally.count(chunk.trust, rule)
    return {k: v for k, v in tally.trust().items() if k != "front_matter"}


def selection_for(
    config: IngestConfig,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    *,
    by: str = "cli",
) -> Selection:
    """The selection of an ingest: ``include`` / ``exclude`` given (not None) by ``by`` replace the configured lists.

    Raises:
        IngestError: a glob the caller gave is not one (naming ``include`` or ``exclude``).
    """
    lists: dict[str, tuple[str, ...]] = {}
    set_by: dict[str, str] = {}
    for name, given in (("include", include), ("exclude", exclude)):
        if given is not None:
            lists[name], set_by[name] = tuple(str(g) for g in given), by
            _globs(lists[name], name)
        else:
            lists[name] = tuple(getattr(config, name))
            set_by[name] = "config" if lists[name] else "default"
    return Selection(lists["include"], lists["exclude"], set_by, config.trust, config.trust.front_matter)


_Lists = tuple[tuple[str, ...] | None, tuple[str, ...] | None]
_REQUESTED: ContextVar[_Lists] = ContextVar("fabric_requested_allowlist", default=(None, None))


@contextmanager
def requesting(include: Sequence[str] | None, exclude: Sequence[str] | None) -> Iterator[None]:
    """Run the block (an ingestion task of the service) with a request's ``include`` / ``exclude`` (None: not
    given), which :func:`requested_selection` puts over the configured allowlist."""
    inc = tuple(include) if include is not None else None
    token = _REQUESTED.set((inc, tuple(exclude) if exclude is not None else None))
    try:
        yield
    finally:
        _REQUESTED.reset(token)


def requested_selection(config: IngestConfig) -> Selection:
    """The selection of the running ingestion task: the request's lists (:func:`requesting`) over ``config``'s."""
    include, exclude = _REQUESTED.get()
    return selection_for(config, include, exclude, by="request")


_SCHEMA = """
CREATE TABLE IF NOT EXISTS selections (
    source TEXT PRIMARY KEY,
    allowlist TEXT,
    trust TEXT,
    updated_at TEXT NOT NULL
)
"""


def record_selection(ledger: Path, source: str, allowlist: Mapping[str, Any] | None, trust: Any) -> None:
    """Keep the allowlist and trust counts that produced ``source``'s chunks in the ledger (table ``selections``)."""
    conn = sqlite3.connect(ledger, timeout=30.0)
    try:
        with conn:
            conn.execute(_SCHEMA)
            conn.execute(
                "INSERT OR REPLACE INTO selections (source, allowlist, trust, updated_at) VALUES (?, ?, ?, ?)",
                (source, json.dumps(allowlist), json.dumps(trust), datetime.now(UTC).isoformat()),
            )
    finally:
        conn.close()
