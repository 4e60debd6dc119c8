"""Source loaders: BEIR corpora, folders of Markdown/text, JSONL entries → :class:`~fabric.core.chunks.Chunk`.

- ``beir``: a folder with ``corpus.jsonl`` (``_id``, ``title``, ``text``); one chunk per document and
  ``id == doc_id == chunk_id == _id``, so evaluations score hits by the BEIR id. Imports: untrusted.
- ``markdown``: a folder (or one file) of ``.md``/``.markdown``/``.txt``, narrowed by the allowlist; chunked by
  headings (:mod:`fabric.ingest.chunking`); ``doc_id = <source>:<relative path>``, ``id = doc_id#chunk_id``. Each
  file's trust comes from the trust rules (trusted: ``source_kind = operator``; untrusted: ``import``), front matter
  ``trust:``/``source_kind:`` overriding them for the operator and admin keys (:mod:`fabric.ingest.selection`).
  ``published_at`` from front matter ``date:`` or a ``YYYY-MM-DD`` in the file name; front matter ``author:`` is kept
  in the chunks' metadata (the bibliography's ``author``, :mod:`fabric.core.sources`).
- ``jsonl``: one entry per line with ``id``, ``title``, ``text`` and optional ``url``, ``published_at``,
  ``author`` (a string, kept in the chunk's metadata), ``source_kind``, ``source_ref``, ``trust`` and ``triples``
  (``[[subject, predicate, object], ...]``: relations the graph stores as given, next to those it extracts; kept in
  the chunk's metadata); one chunk per entry. The rules of each field: :mod:`fabric.ingest.entries`.

Each JSONL entry is checked by :class:`fabric.ingest.entries.Entry`, the model whose JSON Schema
``GET /openapi.json`` publishes. A publication date in the future is kept as given in every format (no JSON Schema can
state "not after now"; fusion's recency counts it as age 0, :mod:`fusion.boosts`).

JSON lines (``jsonl`` and BEIR's ``corpus.jsonl``) are parsed by :func:`fabric.core.safejson.loads`: a line nested
deeper than 64 levels, holding a lone surrogate (``"\ud800"``) or ``NaN`` is an :class:`IngestError` naming
file, line and field, like any other malformed line.

Loading reads, parses and splits (the *load* stage); :func:`finalize` then adds the years mentioned (temporal
filters), content quality, the dedup features fusion reads from hits (SimHash of the text, URL key, title key)
and the content hash (the *chunk* stage). :func:`finalize_all` does it for a batch, hashing every text at once.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from fabric.core import safejson
from fabric.core.chunks import Chunk
from fabric.core.errors import IngestError
from fabric.core.models import SourceKind, Trust
from fabric.ingest.chunking import chunk_markdown, extract_years, parse_date, split_frontmatter
from fabric.ingest.entries import Entry, entry_error, entry_id, parse_published
from fabric.ingest.selection import Selection, entries_trust
from fabric.ingest.sourcefile import check_source, open_source, read_source
from fusion.quality import content_quality
from fusion.simhash import simhash64, simhash_many
from fusion.text import title_key
from fusion.urls import url_key

__all__ = [
    "FORMATS",
    "LoadedSource",
    "detect_format",
    "finalize",
    "finalize_all",
    "jsonl_chunks",
    "load_source",
    "markdown_files",
]

FORMATS = ("beir", "markdown", "jsonl")
_TEXT_SUFFIXES = (".md", ".markdown", ".txt")


class _Unset:
    """Marks an argument that was not given (None is a valid SimHash: a text without words)."""


_UNSET = _Unset()


_HASHED = (
    "id", "doc_id", "chunk_id", "title", "text", "url", "domain", "years", "source_ref", "quality",
    "simhash", "url_key", "title_key",
)  # fmt: skip
"""Chunk fields in the content hash (with dates, kinds and metadata): a new feature algorithm rewrites the chunk."""


@dataclass(frozen=True, slots=True)
class LoadedSource:
    """Chunks of one source, plus the source key the ledger groups them under."""

    source: str
    """``<format>:<resolved path>``; chunks of this source missing from a new load are deleted."""
    fmt: str
    docs: int
    chunks: list[Chunk]
    allowlist: dict[str, Any] | None = None
    """The allowlist that narrowed a folder walk (the report's ``allowlist``); None for BEIR and JSONL."""
    trust: dict[str, Any] | None = None
    """Documents per trust and per deciding rule (the report's ``trust``)."""


def _text(name: str | Path) -> str:
    """A file name as text for ids and source keys: bytes that are not UTF-8 (surrogate-escaped by Python) are
    written ``\\xff``, so the stores and the ledger, which take only valid Unicode, accept every file name."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def detect_format(path: Path) -> str:
    """Guess the format of ``path``.

    Raises:
        IngestError: the path does not exist or its format cannot be guessed.
    """
    if not path.exists():
        raise IngestError(f"path: {path} does not exist")
    check_source(path)  # a FIFO, socket or device is refused before anything opens it
    if path.is_dir():
        return "beir" if (path / "corpus.jsonl").is_file() else "markdown"
    if path.suffix.lower() == ".jsonl":
        return "jsonl"
    if path.suffix.lower() in _TEXT_SUFFIXES:
        return "markdown"
    raise IngestError(f"path: cannot tell the format of {path}; pass --format ({', '.join(FORMATS)})")


def _domain(url: str) -> str:
    host = urlsplit(url).hostname or "" if url.startswith(("http://", "https://")) else ""
    return host.removeprefix("www.")


def finalize(chunk: Chunk, simhash: int | _Unset | None = _UNSET) -> Chunk:
    """Fill years, quality, the dedup features (SimHash, URL key, title key) and the content hash of a chunk.

    Args:
        chunk: a loaded chunk.
        simhash: the text's SimHash when already computed (:func:`finalize_all` hashes every text in one batch).
    """
    years = set(chunk.years) | set(extract_years(chunk.title, chunk.text))
    if chunk.published_at is not None:
        years.add(chunk.published_at.year)
    quality = chunk.quality if chunk.quality is not None else round(content_quality(chunk.title, chunk.text), 6)
    sig = simhash64(chunk.text) if isinstance(simhash, _Unset) else simhash
    out = replace(
        chunk,
        years=tuple(sorted(years)),
        quality=quality,
        domain=chunk.domain or _domain(chunk.url),
        simhash=sig,
        url_key=url_key(chunk.url),
        title_key=title_key(chunk.title),
    )
    payload = {f: getattr(out, f) for f in _HASHED}
    payload |= {
        "published_at": out.published_at.isoformat() if out.published_at else None,
        "source_kind": out.source_kind.value,
        "trust": out.trust.value,
        "metadata": dict(out.metadata),
    }
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
    return replace(out, content_hash=digest)


def finalize_all(chunks: Sequence[Chunk]) -> list[Chunk]:
    """:func:`finalize` every chunk, their SimHashes computed in one vectorised batch."""
    return [finalize(c, s) for c, s in zip(chunks, simhash_many([c.text for c in chunks]), strict=True)]


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        with open_source(path) as fh:  # a regular file only: never blocks on a FIFO
            for n, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    row = safejson.loads(line)
                except safejson.JSONInputError as exc:
                    raise IngestError(f"{path}:{n}: {exc}") from None
                if not isinstance(row, dict):
                    raise IngestError(f"{path}:{n}: expected a JSON object")
                yield n, row
    except (OSError, UnicodeDecodeError) as exc:
        raise IngestError(f"{path}: cannot read: {exc}") from None


def _load_beir(path: Path) -> LoadedSource:
    corpus = path / "corpus.jsonl" if path.is_dir() else path
    if not corpus.is_file():
        raise IngestError(f"path: {path} has no corpus.jsonl (BEIR layout)")
    ref = f"beir:{_text(path.name)}"
    chunks = []
    for n, row in _read_jsonl(corpus):
        if "_id" not in row:
            raise IngestError(f"{corpus}:{n}: missing field _id")
        cid = str(row["_id"])
        chunk = Chunk(
            id=cid, doc_id=cid, chunk_id=cid, title=str(row.get("title") or ""), text=str(row.get("text") or ""),
            url=f"doc:{ref}/{cid}", source_kind=SourceKind.IMPORT, source_ref=ref, trust=Trust.UNTRUSTED,
        )  # fmt: skip
        chunks.append(chunk)
    trust = entries_trust(chunks, "beir import")
    source = f"beir:{_text(path.resolve())}"
    return LoadedSource(source=source, fmt="beir", docs=len(chunks), chunks=chunks, trust=trust)


def _entry_metadata(entry: Entry) -> dict[str, Any]:
    """The metadata a JSONL entry keeps: its ``triples`` and its ``author`` (stripped), when given."""
    meta: dict[str, Any] = {}
    if entry.triples is not None:
        meta["triples"] = [[x.strip() for x in row] for row in entry.triples]
    if entry.author is not None:
        meta["author"] = entry.author.strip()
    return meta


def jsonl_chunks(path: Path) -> Iterator[Chunk]:
    """The chunks of a JSONL entry file one at a time, checked as :func:`load_source` checks them (which keeps
    them all; a caller that only validates, like ``POST /v1/ingest``, keeps none).

    Raises:
        IngestError: naming file, line and field.
    """
    ref = f"jsonl:{_text(path.name)}"
    validate = Entry.model_validate
    for n, row in _read_jsonl(path):
        try:
            entry = validate(row)
        except ValidationError as exc:
            raise IngestError(f"{path}:{n}: {entry_error(exc)}") from None
        eid = entry_id(entry.id)
        chunk = Chunk(
            id=eid, doc_id=eid, chunk_id=eid, title=entry.title or "", text=entry.text,
            url=entry.url or f"doc:{ref}/{eid}", published_at=parse_published(entry.published_at),
            source_kind=SourceKind(entry.source_kind.lower()) if entry.source_kind else SourceKind.IMPORT,
            source_ref=entry.source_ref or ref,
            trust=Trust(entry.trust.lower()) if entry.trust else Trust.UNTRUSTED,
            metadata=_entry_metadata(entry),
        )  # fmt: skip
        yield chunk


def _load_jsonl(path: Path) -> LoadedSource:
    chunks = list(jsonl_chunks(path))
    trust = entries_trust(chunks, "entry field")
    source = f"jsonl:{_text(path.resolve())}"
    return LoadedSource(source=source, fmt="jsonl", docs=len(chunks), chunks=chunks, trust=trust)


def markdown_files(path: Path) -> tuple[Path, list[Path]]:
    """The folder a Markdown source's paths are relative to, and its files (sorted; dot-files and dot-folders such
    as ``.git`` left out), before the allowlist narrows them."""
    if not path.is_dir():
        return path.parent, [path]
    files = sorted(p for p in path.rglob("*") if p.suffix.lower() in _TEXT_SUFFIXES and p.is_file())
    return path, [f for f in files if not any(part.startswith(".") for part in f.relative_to(path).parts)]


def _load_markdown(path: Path, selection: Selection) -> LoadedSource:
    root, files = markdown_files(path)
    files, tally = selection.admitted(root, files)
    source = _text(root.resolve().name) or "docs"
    chunks = []
    for file in files:
        rel = _text(file.relative_to(root).as_posix())
        raw = read_source(file)  # a regular file only: never blocks on a FIFO
        meta, body = split_frontmatter(raw)
        doc_id = f"{source}:{rel}"
        title = meta.get("title") or _first_heading(body) or file.stem
        published = parse_date(meta.get("date")) or parse_date(file.name)
        kind, trust, rule = selection.decide(rel, meta, str(file))
        tally.count(trust, rule)
        extra = {"path": rel, **{k: v for k, v in meta.items() if k in ("doc_kind", "tags", "commit", "author") and v}}
        for sec in chunk_markdown(body, title):
            path_title = " › ".join(dict.fromkeys((title, *sec.heading_path)))
            chunk = Chunk(
                id=f"{doc_id}#{sec.chunk_id}", doc_id=doc_id, chunk_id=sec.chunk_id, title=path_title,
                text=sec.text, url=f"doc:{doc_id}#{sec.chunk_id}", published_at=published, source_kind=kind,
                source_ref=f"{source}/{rel}", trust=trust,
                metadata={**extra, "heading_path": list(sec.heading_path)},
            )  # fmt: skip
            chunks.append(chunk)
    return LoadedSource(
        source=f"markdown:{_text(path.resolve())}", fmt="markdown", docs=len(files), chunks=chunks,
        allowlist=tally.allowlist(len(files)), trust=tally.trust(),
    )  # fmt: skip


def _first_heading(body: str) -> str:
    for line in body.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return ""


def load_source(path: Path, fmt: str | None = None, selection: Selection | None = None) -> LoadedSource:
    """Load and chunk ``path`` in ``fmt`` (auto-detected when None); a Markdown source is narrowed and trusted by
    ``selection`` (default: the shipped trust rules, no allowlist).

    Raises:
        IngestError: missing path, unknown format, unreadable or malformed input (naming file, line, field), an
            allowlist given for a BEIR or JSONL source, or one that admits none of a folder's files.
    """
    fmt = (fmt or detect_format(path)).lower()
    selection = selection or Selection()
    if fmt not in FORMATS:
        raise IngestError(f"format: unknown format {fmt!r}; valid: {', '.join(FORMATS)}")
    if not path.exists():
        raise IngestError(f"path: {path} does not exist")
    check_source(path)
    if fmt != "markdown" and selection.explicit and (selection.include or selection.exclude):
        raise IngestError(f"allowlist: include/exclude narrow folder walks (markdown); a {fmt} source is one file")
    if fmt == "beir":
        return _load_beir(path)
    if fmt == "jsonl":
        if path.is_dir():
            raise IngestError(f"path: {path} is a folder; --format jsonl expects a .jsonl file")
        return _load_jsonl(path)
    return _load_markdown(path, selection)
