"""The audit history of a home (``<home>/audit.sqlite``): who created, updated or deleted which entry and triple.

The API contract asks that created or updated entries *and triples* be auditable. Every record names:

- ``subject``: ``entry`` (one stored chunk; its ``entry_id`` is the chunk id, ``doc_id`` the entry it came from)
  or ``triple`` (the graph relations ``subject --predicate--> object`` extracted from that chunk that one write
  created, or deleted: one record per chunk and action lists them in ``triples``, so a bulk import appends one
  record per chunk rather than one per relation);
- ``action``: ``created``, ``updated`` or ``deleted`` (an interrupted write repaired unchanged is not audited:
  nothing changed). A triple is only ever ``created`` or ``deleted``: when its chunk is updated, the triples the
  new text no longer yields are recorded deleted and the new ones created;
- who: the ``tenant``, the API ``key_id`` (:data:`OPERATOR_KEY_ID` for the local operator: the CLI, the Python
  API and MCP over stdio; None in open mode) and the ingestion ``task_id`` (None for a CLI run or a delete), and
  ``via`` (``cli``, ``api``);
- when: ``ts`` (UTC, ISO 8601 with microseconds) and a monotonically increasing ``seq``, the paging cursor.

The writer of a mutation does not pass the caller around: the caller is an :class:`Actor` in a context variable
(:func:`acting_as`), set by the service's task worker, the delete route and the CLI, and read by whoever writes the
records (the ingestion pipeline, :mod:`fabric.ingest.deletion`). Records are only ever appended. The sources named
are the public form (``api`` or ``<format>:<file name>``), never a server path.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = [
    "ACTIONS",
    "AUDIT_FILE",
    "OPERATOR_KEY_ID",
    "Actor",
    "AuditLog",
    "AuditPage",
    "AuditRecord",
    "EntryChange",
    "TripleChange",
    "acting_as",
    "current_actor",
    "parse_since",
]

AUDIT_FILE = "audit.sqlite"
"""The audit history's file name under a home."""
ACTIONS = ("created", "updated", "deleted")
"""What an audit record says happened."""
OPERATOR_KEY_ID = "operator"
"""The key id of the local operator (who runs the CLI, the Python API or MCP over stdio on the home): never an API
key's id, which is 12 hex digits."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    ts TEXT NOT NULL,
    tenant TEXT NOT NULL,
    subject TEXT NOT NULL CHECK (subject IN ('entry', 'triple')),
    action TEXT NOT NULL CHECK (action IN ('created', 'updated', 'deleted')),
    entry_id TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    source TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    triples TEXT,
    task_id TEXT,
    key_id TEXT,
    via TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_tenant_entry ON audit(tenant, entry_id);
CREATE INDEX IF NOT EXISTS audit_tenant_doc ON audit(tenant, doc_id);
"""
# No index on ts: records are appended in time order, so a ``since`` filter scans the tail of seq; each index
# costs about a fifth of the append time of a bulk ingest.
_COLUMNS = "seq, ts, tenant, subject, action, entry_id, doc_id, source, content_hash, triples, task_id, key_id, via"


@dataclass(frozen=True, slots=True)
class Actor:
    """Who is mutating the stores right now."""

    tenant: str = "default"
    key_id: str | None = None
    task_id: str | None = None
    via: str = "cli"
    role: str = "operator"
    """``operator`` (the local operator), ``admin`` or ``writer`` (an API key's role): what it may replace or delete
    (:mod:`fabric.ingest.provenance`)."""


_ACTOR: ContextVar[Actor] = ContextVar("fabric_audit_actor", default=Actor())  # noqa: B039 (frozen, immutable)


def current_actor() -> Actor:
    """The actor of the running mutation (the CLI's ``default`` actor when none was set)."""
    return _ACTOR.get()


@contextmanager
def acting_as(actor: Actor) -> Iterator[Actor]:
    """Run the block (and the threads and tasks it starts) as ``actor``."""
    token = _ACTOR.set(actor)
    try:
        yield actor
    finally:
        _ACTOR.reset(token)


@dataclass(frozen=True, slots=True)
class EntryChange:
    """One chunk created, updated or deleted."""

    action: str
    entry_id: str
    doc_id: str
    source: str
    content_hash: str = ""


@dataclass(frozen=True, slots=True)
class TripleChange:
    """The graph triples of one chunk created (or deleted) by one write: one object per chunk and action, not per
    triple (a 50K-passage ingest creates 1.6M triples; an object each cost 6.5 s of the audit stage)."""

    action: str
    entry_id: str
    triples: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One row of the history, as ``GET /v1/audit`` and ``fabric audit --json`` show it."""

    seq: int
    ts: str
    tenant: str
    subject: str
    action: str
    entry_id: str
    doc_id: str
    source: str
    content_hash: str
    triples: tuple[tuple[str, str, str], ...]
    task_id: str | None
    key_id: str | None
    via: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record (``triples`` as ``{subject, predicate, object}`` objects; empty for an entry)."""
        out = asdict(self)
        out["triples"] = [{"subject": s, "predicate": p, "object": o} for s, p, o in self.triples]
        return out


@dataclass(frozen=True, slots=True)
class AuditPage:
    """A page of records, oldest first; ``next_after`` is the cursor of the next page (None at the end)."""

    records: list[AuditRecord]
    next_after: int | None


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_since(text: str) -> str:
    """An ISO 8601 time (``Z`` or an offset; a date alone is midnight UTC) as the history stores times.

    Raises:
        ValueError: not an ISO 8601 date or time.
    """
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"expected an ISO 8601 time such as 2026-01-31T12:00:00Z, got {text[:40]!r}") from None
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _record(row: Sequence[Any]) -> AuditRecord:
    triples = tuple((str(s), str(p), str(o)) for s, p, o in json.loads(row[9])) if row[9] else ()
    return AuditRecord(
        seq=row[0], ts=row[1], tenant=row[2], subject=row[3], action=row[4], entry_id=row[5], doc_id=row[6],
        source=row[7], content_hash=row[8], triples=triples, task_id=row[10], key_id=row[11], via=row[12],
    )  # fmt: skip


class AuditLog:
    """Append and read the audit history of one home (synchronous: callers run it in a worker thread).

    The file is created on the first write; reading a home that never wrote one answers no records.
    """

    def __init__(self, home: Path) -> None:
        self.path = home / AUDIT_FILE
        self._conn: sqlite3.Connection | None = None

    def _connect(self, *, create: bool) -> sqlite3.Connection | None:
        if self._conn is None:
            if not create and not self.path.is_file():
                return None
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)
            self._conn = conn
        return self._conn

    def record(
        self,
        entries: Iterable[EntryChange],
        triples: Iterable[TripleChange] = (),
        *,
        actor: Actor | None = None,
        docs: dict[str, tuple[str, str]] | None = None,
    ) -> int:
        """Append entry and triple changes as ``actor`` (default: :func:`current_actor`); returns rows written.

        ``docs`` maps a triple's entry id to its ``(doc_id, source)`` when no entry change names it.
        """
        who = actor or current_actor()
        now = _now()
        entry_rows = list(entries)
        known = {e.entry_id: (e.doc_id, e.source) for e in entry_rows} | dict(docs or {})
        base = (who.task_id, who.key_id, who.via)
        rows: list[tuple[str | None, ...]] = [
            (now, who.tenant, "entry", e.action, e.entry_id, e.doc_id, e.source, e.content_hash, None, *base)
            for e in entry_rows
        ]
        grouped: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
        for t in triples:
            grouped.setdefault((t.entry_id, t.action), []).extend(t.triples)
        for (entry_id, action), found in grouped.items():
            doc_id, source = known.get(entry_id, (entry_id, ""))
            listed = json.dumps(sorted(found), ensure_ascii=False, separators=(",", ":"))
            rows.append((now, who.tenant, "triple", action, entry_id, doc_id, source, "", listed, *base))
        if not rows:
            return 0
        conn = self._connect(create=True)
        assert conn is not None
        with conn:
            conn.executemany(
                f"INSERT INTO audit ({_COLUMNS.removeprefix('seq, ')}) VALUES ({', '.join('?' * 12)})", rows
            )
        return len(rows)

    def page(
        self,
        tenant: str,
        *,
        entry_id: str | None = None,
        since: str | None = None,
        after: int = 0,
        limit: int = 100,
    ) -> AuditPage:
        """Records of ``tenant`` after cursor ``after``, oldest first, at most ``limit``.

        Args:
            entry_id: only records of this chunk id or of the chunks of this entry (doc id).
            since: only records at or after this UTC time (ISO 8601, compared as normalised text).
        """
        conn = self._connect(create=False)
        if conn is None:
            return AuditPage([], None)
        sql = f"SELECT {_COLUMNS} FROM audit WHERE tenant = ? AND seq > ?"
        args: list[Any] = [tenant, after]
        if entry_id is not None:
            sql += " AND (entry_id = ? OR doc_id = ?)"
            args += [entry_id, entry_id]
        if since is not None:
            sql += " AND ts >= ?"
            args.append(since)
        rows = conn.execute(sql + " ORDER BY seq LIMIT ?", (*args, limit + 1)).fetchall()
        records = [_record(r) for r in rows[:limit]]
        return AuditPage(records, records[-1].seq if len(rows) > limit else None)

    def owners(self, entry_ids: Sequence[str]) -> dict[str, str]:
        """The tenant of the latest ``created``/``updated`` entry record of each id (ids never audited are absent)."""
        conn = self._connect(create=False)
        if conn is None:
            return {}
        out: dict[str, str] = {}
        for i in range(0, len(entry_ids), 500):
            part = list(entry_ids[i : i + 500])
            marks = ",".join("?" * len(part))
            rows = conn.execute(
                "SELECT entry_id, tenant FROM audit WHERE seq IN (SELECT max(seq) FROM audit WHERE subject = 'entry' "
                f"AND action != 'deleted' AND entry_id IN ({marks}) GROUP BY entry_id)",
                part,
            )
            out.update(dict(rows.fetchall()))
        return out

    def close(self) -> None:
        """Close the connection (reopened on the next use)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
