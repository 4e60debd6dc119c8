"""Markdown chunking by headings with stable ids, plus the date/year helpers every loader uses.

Rules (the docs-memory policy):
- split on ATX headings (``#`` .. ``######``); each section's title is the heading path (``Doc › H2 › H3``);
- consecutive short sections are kept together up to ``cap_chars``; a long section is split on paragraph
  boundaries (and, for a single huge paragraph, hard-cut) so no chunk exceeds ``max_chars``;
- ``chunk_id`` = heading anchor (GitHub-style slug of the first heading in the chunk) + ``-`` + ordinal of that
  anchor within the document, so editing one section never renames the chunks of another.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["Section", "chunk_markdown", "extract_years", "parse_date", "slugify", "split_frontmatter"]

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_YEAR = re.compile(r"(?<!\d)(?<!\d\.)(1[89]\d\d|20\d\d|2100)(?!\d|\.\d)")
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?)?")


@dataclass(frozen=True, slots=True)
class Section:
    """One chunk of a Markdown document before it becomes a :class:`~fabric.core.chunks.Chunk`."""

    chunk_id: str
    heading_path: tuple[str, ...]
    text: str


def slugify(text: str) -> str:
    """GitHub-style heading anchor: lowercase, punctuation dropped, spaces to hyphens."""
    slug = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return re.sub(r"\s+", "-", slug).strip("-") or "section"


def parse_date(value: object) -> datetime | None:
    """A UTC datetime from ``YYYY-MM-DD[THH:MM[:SS]]`` text (or a datetime/date), else None."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if value is None:
        return None
    m = _DATE.search(str(value))
    if not m:
        return None
    y, mo, d, hh, mm, ss = (int(g) if g else 0 for g in m.groups())
    try:
        return datetime(y, mo, d, hh, mm, ss, tzinfo=UTC)
    except ValueError:
        return None


def extract_years(*texts: str) -> tuple[int, ...]:
    """Distinct plausible years (1800–2100) mentioned in ``texts``, sorted."""
    found = {int(m.group(1)) for t in texts for m in _YEAR.finditer(t)}
    return tuple(sorted(found))


def split_frontmatter(text: str) -> tuple[dict[str, str], str]:
    """Split a ``---``-delimited ``key: value`` front matter block off ``text``."""
    if not text.startswith("---"):
        return {}, text
    end = text.find("\n---", 3)
    if end < 0:
        return {}, text
    meta: dict[str, str] = {}
    for line in text[3:end].splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            meta[key.strip().lower()] = value.strip().strip("\"'")
    body = text[end + 4 :]
    return meta, body.lstrip("\n")


def _sections(body: str, doc_title: str) -> list[tuple[str, tuple[str, ...], str]]:
    """(anchor, heading path, text) for each heading-delimited section, in order."""
    out: list[tuple[str, tuple[str, ...], str]] = []
    stack: list[tuple[int, str]] = []
    anchor = ""
    lines: list[str] = []
    in_fence = False

    def flush() -> None:
        text = "\n".join(lines).strip()
        path = tuple(h for _, h in stack) or (doc_title,)
        if text or anchor:
            out.append((anchor or "intro", path, text))

    for line in body.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        m = None if in_fence else _HEADING.match(line)
        if m:
            flush()
            level, heading = len(m.group(1)), m.group(2).strip()
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, heading))
            anchor, lines = slugify(heading), []
        else:
            lines.append(line)
    flush()
    return [s for s in out if s[2]]


def _split_long(text: str, max_chars: int) -> list[str]:
    parts: list[str] = []
    cur = ""
    for para in re.split(r"\n\s*\n", text):
        para = para.strip()
        while len(para) > max_chars:
            cut = para.rfind(" ", 0, max_chars)
            cut = cut if cut > max_chars // 2 else max_chars
            if cur:
                parts.append(cur)
                cur = ""
            parts.append(para[:cut].strip())
            para = para[cut:].strip()
        if cur and len(cur) + 2 + len(para) > max_chars:
            parts.append(cur)
            cur = ""
        cur = f"{cur}\n\n{para}" if cur else para
    if cur:
        parts.append(cur)
    return [p for p in parts if p]


def chunk_markdown(body: str, doc_title: str, *, cap_chars: int = 1200, max_chars: int = 2000) -> list[Section]:
    """Chunk a Markdown body (front matter already removed) into sections with stable chunk ids."""
    merged: list[tuple[str, tuple[str, ...], str]] = []
    for anchor, path, text in _sections(body, doc_title):
        block = text if path == (doc_title,) else f"{path[-1]}\n{text}"
        if merged and len(merged[-1][2]) + 2 + len(block) <= cap_chars:
            a, p, t = merged[-1]
            merged[-1] = (a, p, f"{t}\n\n{block}")
        else:
            merged.append((anchor, path, block))
    sections: list[Section] = []
    seen: dict[str, int] = {}
    for anchor, path, text in merged:
        for piece in _split_long(text, max_chars):
            n = seen.get(anchor, 0)
            seen[anchor] = n + 1
            sections.append(Section(chunk_id=f"{anchor}-{n}", heading_path=path, text=piece))
    return sections
