"""Validation of ``POST /v1/ingest`` bodies and the spooling of entries for the JSONL loader.

A body is ``{"entries": [...]}`` in the JSONL entry format (:class:`fabric.ingest.entries.Entry`: ``id``,
``text``, optional ``title``, ``url``, ``published_at``, ``author``, ``source_kind``, ``source_ref``, ``trust``,
``triples``) or ``{"path": "..."}`` under the configured
``ingest.allowed_root``, plus optional ``"format"`` and ``"async"``; a Markdown ``path`` may carry ``"include"`` /
``"exclude"`` (lists of path globs replacing ``[ingest] include`` / ``exclude``, :mod:`fabric.ingest.selection`),
checked here: a bad glob, one for another format or entries, or an allowlist admitting none of the folder's files is
a 400. Entries are written to a content-addressed spool file and validated by the JSONL loader itself
(:func:`fabric.ingest.loaders.jsonl_chunks`), so the HTTP route accepts exactly what ``fabric ingest`` accepts and
answers the loader's messages (``entries[3]: missing field id``). Paths are resolved (symlinks included) before the
root check, so ``..`` and links pointing out of the root are refused; a folder is also refused when a link inside it
leads out of the root (checked at submission: the root should be a folder only the operator writes to).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from collections import deque
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabric.core.errors import ConfigError, IngestError, QueryError
from fabric.ingest.entries import entry_id
from fabric.ingest.ledger import LEDGER_FILE, Ledger
from fabric.ingest.loaders import FORMATS, detect_format, jsonl_chunks, markdown_files
from fabric.ingest.provenance import PRIVILEGED, ProvenanceError, check_writable
from fabric.ingest.selection import requesting, selection_for
from fabric.ingest.sourcefile import check_source
from fabric.settings import IngestConfig

__all__ = [
    "IDEMPOTENCY_KEY_PATTERN",
    "OPERATOR_FIELDS",
    "SPOOL_NAME",
    "Submission",
    "SubmitError",
    "check_operator_fields",
    "check_provenance",
    "parse_submission",
    "resolve_root",
    "spool_entries",
]

_BODY_KEYS = ("entries", "path", "format", "async", "include", "exclude")
IDEMPOTENCY_KEY_PATTERN = r"^[\x21-\x7e](?:[\x20-\x7e]{0,253}[\x21-\x7e])?$"
"""An ``Idempotency-Key`` header value: 1 to 255 visible ASCII characters (inner spaces allowed)."""
SPOOL_NAME = "api.jsonl"
"""File name of a spooled entry list (``<home>/spool/<body hash>/api.jsonl``); entries default to
``source_ref = "jsonl:api.jsonl"``."""


class SubmitError(QueryError):
    """A submission the service refuses, with the HTTP status to answer.

    Args:
        field: the body field or header at fault.
        message: what is wrong.
        status: 400 bad input, 403 path not allowed, 409 an idempotency key reused with another body, 422 an
            entry the JSONL loader refuses (:class:`fabric.ingest.entries.Entry`: a URL that is not http(s), an
            unknown trust value...), 503 queue full.
    """

    def __init__(self, field: str, message: str, *, status: int = 400) -> None:
        super().__init__(field, message)
        self.status = status


@dataclass(frozen=True, slots=True, kw_only=True)
class Submission:
    """A validated ``POST /v1/ingest`` body."""

    kind: str
    """``entries`` or ``path``."""
    fingerprint: str
    """sha256 of the canonical body (``async`` excluded): the idempotency key when no header is given."""
    entries: Sequence[Mapping[str, Any]] = ()
    """The entries (kind ``entries``) until they are spooled; task records drop them (only ``count`` stays)."""
    count: int = 0
    """Number of entries (kind ``entries``)."""
    path: Path | None = None
    """Resolved source under the allowed root (kind ``path``)."""
    requested_path: str = ""
    """The path as the client wrote it (reported back instead of the server's absolute path)."""
    fmt: str | None = None
    """Source format; ``jsonl`` for entries."""
    force_async: bool = False
    """``"async": true`` in the body: always a task, never inline."""
    tenant: str = "default"
    """The submitting tenant (kept in the task record; the audit history names the queue's tenant, the same)."""
    key_id: str | None = None
    """The submitting API key's id (``operator`` for the local operator, None in open mode); recorded in the audit
    history."""
    role: str = "writer"
    """The submitter's role (``operator``, ``admin`` or ``writer``): what the task may replace or delete
    (:mod:`fabric.ingest.provenance`). Least privilege unless the door says otherwise."""
    include: tuple[str, ...] | None = None
    """A path submission's ``include`` globs (None: not given, the configured ones apply)."""
    exclude: tuple[str, ...] | None = None
    """A path submission's ``exclude`` globs (None: not given)."""

    def allowlist(self) -> AbstractContextManager[None]:
        """The block runs with this submission's allowlist (:func:`fabric.ingest.selection.requesting`)."""
        return requesting(self.include, self.exclude)


def resolve_root(config: IngestConfig) -> Path | None:
    """The resolved ``ingest.allowed_root``, or None when path submissions are disabled.

    Raises:
        ConfigError: the root is set but is not an existing folder.
    """
    if not config.allowed_root:
        return None
    root = Path(config.allowed_root).expanduser().resolve()
    if not root.is_dir():
        raise ConfigError(f"{root} is not an existing folder", key="ingest.allowed_root")
    return root


def _fingerprint(data: Mapping[str, Any]) -> str:
    canon = {k: data[k] for k in ("entries", "path", "format", "include", "exclude") if k in data}
    text = json.dumps(canon, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _resolve_path(raw: Any, root: Path | None) -> Path:
    if not isinstance(raw, str) or not raw.strip() or "\x00" in raw:
        raise SubmitError("path", "expected a non-empty string")
    if root is None:
        raise SubmitError("path", "path ingestion is disabled (set ingest.allowed_root to allow a folder)", status=403)
    candidate = Path(raw).expanduser()
    resolved = (candidate if candidate.is_absolute() else root / candidate).resolve()
    if not resolved.is_relative_to(root):
        raise SubmitError("path", "outside the allowed root (ingest.allowed_root)", status=403)
    if not resolved.exists():
        raise SubmitError("path", f"{raw} does not exist under the allowed root")
    try:  # a FIFO, socket or device would hang the tenant's task queue: refused before anything opens it
        check_source(resolved)
    except IngestError as exc:
        raise SubmitError("path", str(exc).replace(str(resolved), raw)) from None
    if resolved.is_dir():  # the folder loaders follow links inside the folder: none may lead out of the root
        for entry in resolved.rglob("*"):
            if entry.is_symlink() and not entry.resolve().is_relative_to(root):
                rel = entry.relative_to(resolved).as_posix()
                raise SubmitError("path", f"{raw} holds a link leading outside the allowed root: {rel}", status=403)
    return resolved


def parse_submission(data: Any, config: IngestConfig, root: Path | None, *, paths: bool = True) -> Submission:
    """Validate a decoded ``POST /v1/ingest`` body (blocking for large bodies: call it in a thread).

    ``paths`` says whether the submitter may ingest a path on the server (an admin key); when not, a path body is
    refused (403, :func:`check_operator_fields`'s answer) before the path is looked at, so the answer never tells
    a writer what exists under the allowed root.

    Raises:
        SubmitError: naming the field at fault, with the HTTP status to answer.
    """
    if not isinstance(data, dict):
        raise SubmitError("body", "expected a JSON object")
    unknown = sorted(set(data) - set(_BODY_KEYS))
    if unknown:
        raise SubmitError("body", f"unknown field(s) {', '.join(unknown)}; valid: {', '.join(_BODY_KEYS)}")
    force_async = data.get("async", False)
    if not isinstance(force_async, bool):
        raise SubmitError("async", "expected true or false")
    fmt = data.get("format")
    if "format" in data and fmt not in FORMATS:  # null too: the document allows a format name or no key
        raise SubmitError("format", f"unknown format {fmt!r}; valid: {', '.join(FORMATS)}")
    if ("entries" in data) == ("path" in data):
        raise SubmitError("body", "expected exactly one of entries (a list of objects) or path")
    if "path" in data:
        if not paths:
            raise SubmitError("path", _PATHS_ADMIN_ONLY, status=403)
        path = _resolve_path(data["path"], root)
        try:
            fmt = fmt or detect_format(path)
        except IngestError as exc:
            raise SubmitError("format", str(exc).replace(str(path), data["path"])) from None
        include, exclude = _allowlist(data, path, fmt, config)
        return Submission(
            kind="path", fingerprint=_fingerprint(data), path=path, requested_path=data["path"], fmt=fmt,
            force_async=force_async, include=include, exclude=exclude,
        )  # fmt: skip
    for name in ("include", "exclude"):
        if name in data:
            raise SubmitError(name, "narrows a path submission (a Markdown folder); entries are not a folder")
    entries = data["entries"]
    if fmt not in (None, "jsonl"):
        raise SubmitError("format", "entries are in the JSONL entry format; omit format or use 'jsonl'")
    if not isinstance(entries, list) or not entries:
        raise SubmitError("entries", "expected a non-empty list of objects")
    if len(entries) > config.max_entries:
        raise SubmitError("entries", f"{len(entries)} entries; at most {config.max_entries} per request")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise SubmitError(f"entries[{i}]", "expected a JSON object")
    return Submission(
        kind="entries",
        fingerprint=_fingerprint(data),
        entries=entries,
        count=len(entries),
        fmt="jsonl",
        force_async=force_async,
    )


def _allowlist(
    data: Mapping[str, Any], path: Path, fmt: str | None, config: IngestConfig
) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """A path submission's ``include`` and ``exclude`` (None when not given), checked against the folder now, so the
    task cannot fail on them.

    Raises:
        SubmitError: 400 naming ``include`` or ``exclude``.
    """
    lists: dict[str, tuple[str, ...] | None] = {}
    for name in ("include", "exclude"):
        raw = data.get(name)
        if name in data and not (isinstance(raw, list) and all(isinstance(g, str) for g in raw)):
            raise SubmitError(name, "expected a list of path globs (strings)")
        lists[name] = tuple(raw) if raw is not None else None
    field = "include" if lists["include"] else "exclude"
    if lists["include"] or lists["exclude"]:
        if fmt != "markdown":
            raise SubmitError(field, f"narrows folder walks (markdown); a {fmt} source is one file")
        try:
            selection_for(config, lists["include"], lists["exclude"], by="request").admitted(*markdown_files(path))
        except IngestError as exc:
            name, _, message = str(exc).replace(str(path), str(data["path"])).partition(": ")
            raise SubmitError(name if name in lists else field, message) from None
    return lists["include"], lists["exclude"]


_PATHS_ADMIN_ONLY = "only an admin key may ingest a path on the server"

OPERATOR_FIELDS = {"trust": "trusted", "source_kind": "operator"}
"""Entry field values only an operator (``admin`` key, or the CLI) may set: they rank an entry as first-party."""


def check_operator_fields(sub: Submission, *, allowed: bool) -> None:
    """Refuse entries claiming operator trust, and path submissions, unless ``allowed`` (refused, never
    silently downgraded).

    Raises:
        SubmitError: 403 naming the first entry field at fault (``entries[3].trust``).
    """
    if allowed:
        return
    if sub.kind == "path":  # files on the server's disk ingest as the operator's own notes
        raise SubmitError("path", _PATHS_ADMIN_ONLY, status=403)
    for i, entry in enumerate(sub.entries):
        for name, value in OPERATOR_FIELDS.items():
            if str(entry.get(name) or "").strip().lower() == value:
                msg = f"only an admin key may set {name}: {value} (a writer's entries are untrusted imports)"
                raise SubmitError(f"entries[{i}].{name}", msg, status=403)


def check_provenance(sub: Submission, home: Path) -> None:
    """Refuse a writer's entries holding ids it may not replace: an entry the operator or an admin key wrote, one
    marked trusted, or the tombstone of one (:mod:`fabric.ingest.provenance`). Blocking (reads the ledger).

    The pipeline enforces the same rule when the task runs; checking at the door answers ``403`` at once rather
    than a failed task.

    Raises:
        SubmitError: 403 naming the first entry at fault (``entries[3].id``) and the rule.
    """
    if sub.role in PRIVILEGED or sub.kind != "entries" or not (home / LEDGER_FILE).is_file():
        return
    ids = [entry_id(e["id"]) for e in sub.entries if e.get("id") is not None]
    ledger = Ledger(home / LEDGER_FILE)
    try:
        held = ledger.provenance(ids)
    finally:
        ledger.close()
    try:
        check_writable(sub.role, held, "replace")
    except ProvenanceError as exc:
        first = next(
            i for i, e in enumerate(sub.entries) if e.get("id") is not None and entry_id(e["id"]) in exc.protected
        )
        raise SubmitError(f"entries[{first}].id", str(exc), status=403) from None


def spool_entries(sub: Submission, path: Path) -> None:
    """Write the entries as JSONL (atomically) and validate them with the JSONL loader, one at a time (neither the
    entries nor their chunks are all kept: ``sub.entries`` may be a streamed body's
    :class:`fabric.serve.tasks.stream.SpooledEntries`).

    Raises:
        SubmitError: the loader refused an entry (field ``entries[i]``).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    with tmp.open("w", encoding="utf-8") as fh:
        for entry in sub.entries:
            fh.write(json.dumps(entry, ensure_ascii=False, sort_keys=True, default=str))
            fh.write("\n")
    os.replace(tmp, path)
    try:
        deque(jsonl_chunks(path), maxlen=0)  # every entry checked, none kept
    except IngestError as exc:  # well-formed JSON the loader refuses: 422 (Unprocessable Content)
        # one entry per line, no blank lines: line n is entries[n - 1]
        m = re.match(re.escape(str(path)) + r":(\d+): (.*)", str(exc), re.DOTALL)
        if m is None:
            raise SubmitError("entries", str(exc), status=422) from None
        raise SubmitError(f"entries[{int(m.group(1)) - 1}]", m.group(2), status=422) from None
