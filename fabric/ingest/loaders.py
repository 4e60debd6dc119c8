"""Source loaders: BEIR corpora, folders of Markdown/text, JSONL entries → :class:`~fabric.core.chunks.Chunk`.

- ``beir``: a folder with ``corpus.jsonl`` (``_id``, ``title``, ``text``); one chunk per document and
  ``id == doc_id == chunk_id == _id``, so evaluations score hits by the BEIR id. Imports: untrusted.
- ``markdown``: a folder (or one file) of ``.md``/``.markdown``/``.txt``; chunked by headings
  (:mod:`fabric.ingest.chunking`); ``doc_id = <source>:<relative path>``, ``id = doc_id#chunk_id``.
  Operator-authored: ``source_kind = operator``, trusted (front matter ``trust:``/``source_kind:`` override).
  ``published_at`` from front matter ``date:`` or a ``YYYY-MM-DD`` in the file name.
- ``jsonl``: one entry per line with ``id``, ``title``, ``text`` and optional ``url``, ``published_at``,
  ``source_kind``, ``trust`` and ``triples`` (``[[subject, predicate, object], ...]``: relations the graph stores
  as given, next to those it extracts; kept in the chunk's metadata); one chunk per entry. A ``url`` must be an
  absolute ``http(s)`` URL.

Publication dates later than now plus :data:`FUTURE_SKEW` are refused in every format.

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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fabric.core import safejson
from fabric.core.chunks import Chunk
from fabric.core.errors import IngestError
from fabric.core.models import SourceKind, Trust
from fabric.ingest.chunking import chunk_markdown, extract_years, parse_date, split_frontmatter
from fusion.quality import content_quality
from fusion.simhash import simhash64, simhash_many
from fusion.text import title_key
from fusion.urls import url_key

__all__ = ["FORMATS", "FUTURE_SKEW", "LoadedSource", "detect_format", "finalize", "finalize_all", "load_source"]

FORMATS = ("beir", "markdown", "jsonl")
FUTURE_SKEW = timedelta(days=1)
"""How far past now a publication date may lie (time zones, clock skew); later dates are refused."""
_MAX_URL_CHARS = 2048
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


def detect_format(path: Path) -> str:
    """Guess the format of ``path``.

    Raises:
        IngestError: the path does not exist or its format cannot be guessed.
    """
    if not path.exists():
        raise IngestError(f"path: {path} does not exist")
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
        with path.open(encoding="utf-8") as fh:
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
    ref = f"beir:{path.name}"
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
    return LoadedSource(source=f"beir:{path.resolve()}", fmt="beir", docs=len(chunks), chunks=chunks)


def _enum(cls: Any, value: Any, default: Any, where: str) -> Any:
    if value in (None, ""):
        return default
    try:
        return cls.from_str(str(value))
    except ValueError as exc:
        raise IngestError(f"{where}: {exc}") from None


def _check_url(raw: Any, where: str) -> str:
    """An entry's ``url``: absolute ``http(s)://host...`` only (``javascript:``, ``data:``, ``file:`` and relative
    URLs are refused: clients render it as a link)."""
    url = str(raw).strip()
    plain = len(url) <= _MAX_URL_CHARS and url.isprintable() and not any(c.isspace() for c in url)
    parts = urlsplit(url) if plain else None
    if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        shown = url if len(url) <= 80 else url[:77] + "..."
        raise IngestError(f"{where}: url: expected an absolute http(s) URL, got {shown!r}")
    return url


def _check_date(value: datetime | None, where: str) -> datetime | None:
    """A publication date no later than now plus :data:`FUTURE_SKEW` (future dates would rank as fresh)."""
    if value is not None and value > datetime.now(UTC) + FUTURE_SKEW:
        raise IngestError(f"{where}: published_at: {value.date().isoformat()} is in the future")
    return value


def _triples(raw: Any, where: str) -> list[list[str]]:
    """The ``triples`` field: a list of ``[subject, predicate, object]`` lists of non-empty strings."""
    if not isinstance(raw, list):
        raise IngestError(f"{where}: triples: expected a list of [subject, predicate, object]")
    out = []
    for i, row in enumerate(raw):
        if not (isinstance(row, list) and len(row) == 3 and all(isinstance(x, str) and x.strip() for x in row)):
            raise IngestError(f"{where}: triples[{i}]: expected [subject, predicate, object] as non-empty strings")
        out.append([x.strip() for x in row])
    return out


def _load_jsonl(path: Path) -> LoadedSource:
    ref = f"jsonl:{path.name}"
    chunks = []
    for n, row in _read_jsonl(path):
        where = f"{path}:{n}"
        missing = [f for f in ("id", "text") if not row.get(f)]
        if missing:
            raise IngestError(f"{where}: missing field {missing[0]}")
        eid = str(row["id"])
        published: datetime | None = None
        if row.get("published_at"):
            published = parse_date(row["published_at"])
            if published is None:
                raise IngestError(f"{where}: published_at: expected YYYY-MM-DD[THH:MM:SS], got {row['published_at']!r}")
        chunk = Chunk(
            id=eid, doc_id=eid, chunk_id=eid, title=str(row.get("title") or ""), text=str(row["text"]),
            url=_check_url(row["url"], where) if row.get("url") else f"doc:{ref}/{eid}",
            published_at=_check_date(published, where),
            source_kind=_enum(SourceKind, row.get("source_kind"), SourceKind.IMPORT, f"{where}: source_kind"),
            source_ref=str(row.get("source_ref") or ref),
            trust=_enum(Trust, row.get("trust"), Trust.UNTRUSTED, f"{where}: trust"),
            metadata={"triples": _triples(row["triples"], where)} if row.get("triples") is not None else {},
        )  # fmt: skip
        chunks.append(chunk)
    return LoadedSource(source=f"jsonl:{path.resolve()}", fmt="jsonl", docs=len(chunks), chunks=chunks)


def _load_markdown(path: Path) -> LoadedSource:
    root = path if path.is_dir() else path.parent
    files = sorted(p for p in root.rglob("*") if p.suffix.lower() in _TEXT_SUFFIXES and p.is_file())
    if not path.is_dir():
        files = [path]
    source = root.resolve().name or "docs"
    chunks = []
    for file in files:
        rel = file.relative_to(root).as_posix()
        if any(part.startswith(".") for part in Path(rel).parts):
            continue
        try:
            raw = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise IngestError(f"{file}: cannot read: {exc}") from None
        meta, body = split_frontmatter(raw)
        doc_id = f"{source}:{rel}"
        title = meta.get("title") or _first_heading(body) or file.stem
        published = _check_date(parse_date(meta.get("date")) or parse_date(file.name), str(file))
        kind = _enum(SourceKind, meta.get("source_kind"), SourceKind.OPERATOR, f"{file}: source_kind")
        trust = _enum(Trust, meta.get("trust"), Trust.TRUSTED, f"{file}: trust")
        extra = {"path": rel, **{k: v for k, v in meta.items() if k in ("doc_kind", "tags", "commit")}}
        for sec in chunk_markdown(body, title):
            path_title = " › ".join(dict.fromkeys((title, *sec.heading_path)))
            chunk = Chunk(
                id=f"{doc_id}#{sec.chunk_id}", doc_id=doc_id, chunk_id=sec.chunk_id, title=path_title,
                text=sec.text, url=f"doc:{doc_id}#{sec.chunk_id}", published_at=published, source_kind=kind,
                source_ref=f"{source}/{rel}", trust=trust,
                metadata={**extra, "heading_path": list(sec.heading_path)},
            )  # fmt: skip
            chunks.append(chunk)
    return LoadedSource(source=f"markdown:{path.resolve()}", fmt="markdown", docs=len(files), chunks=chunks)


def _first_heading(body: str) -> str:
    for line in body.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return ""


def load_source(path: Path, fmt: str | None = None) -> LoadedSource:
    """Load and chunk ``path`` in ``fmt`` (auto-detected when None).

    Raises:
        IngestError: missing path, unknown format, unreadable or malformed input (naming file, line, field).
    """
    fmt = (fmt or detect_format(path)).lower()
    if fmt not in FORMATS:
        raise IngestError(f"format: unknown format {fmt!r}; valid: {', '.join(FORMATS)}")
    if not path.exists():
        raise IngestError(f"path: {path} does not exist")
    if fmt == "beir":
        return _load_beir(path)
    if fmt == "jsonl":
        if path.is_dir():
            raise IngestError(f"path: {path} is a folder; --format jsonl expects a .jsonl file")
        return _load_jsonl(path)
    return _load_markdown(path)
