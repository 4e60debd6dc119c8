"""The bibliography of an answer: every source document it used, cited or not (seed 003).

One :class:`Source` per *document* among the answer's items (a chunk's ``doc_id``, else the item id for lanes
that return whole documents, such as web results), whether or not a sentence cites it. Cited documents come
first, in the order of their ``[n]`` markers (``bibliography[n - 1]`` is marker ``n``), then the uncited ones in
the order of their best-ranked item; ``cited`` and ``marker`` tell them apart. Each entry carries the document's
``id``, the ``item_ids`` of its items in the answer (best first), ``title``, ``url``, ``domain``,
``published_at`` and ``author`` of its best-ranked item (``author`` from the item's ``metadata["author"]``, a
Markdown front-matter or JSONL field kept at ingest; empty when the source names none) and an ``excerpt`` (at
most 300 characters): the passage the caller chose (the cited or best-matching one), else the start of the text.

The same shape is printed by ``fabric cite --json``, answered by ``POST /v1/cite`` and the MCP ``cite`` tool
(:meth:`fusion.citations.CitationResult.to_dict`) and by ``fabric search --json`` / ``POST /v1/search``
(:meth:`fabric.core.search_models.SearchResult.to_dict`, whose markers are the ``citations_required`` ones).
No I/O; imported by :mod:`fabric.core.search_models`, so it imports nothing of the core at run time but the
vocabulary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fabric.core.vocabulary import iso_utc

if TYPE_CHECKING:
    from fabric.core.models import Hit

__all__ = ["EXCERPT_CHARS", "Source", "author_of", "build_bibliography", "document_id", "excerpt"]

EXCERPT_CHARS = 300
"""The longest excerpt, in characters (the item snippet's length)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Source:
    """One source document of an answer."""

    id: str
    """The document id (:func:`document_id`)."""
    marker: int | None
    """Its ``[n]`` marker when a sentence cites it, else None."""
    item_ids: tuple[str, ...]
    """Ids of the answer's items from this document, best first."""
    title: str = ""
    url: str = ""
    domain: str = ""
    published_at: datetime | None = None
    author: str = ""
    excerpt: str = ""

    @property
    def cited(self) -> bool:
        """Whether a sentence of the answer cites this document."""
        return self.marker is not None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of a bibliography entry."""
        return {
            "marker": self.marker,
            "cited": self.cited,
            "id": self.id,
            "item_ids": list(self.item_ids),
            "title": self.title,
            "url": self.url,
            "domain": self.domain,
            "published_at": iso_utc(self.published_at),
            "author": self.author,
            "excerpt": self.excerpt,
        }


def document_id(hit: Hit) -> str:
    """The document an item belongs to: its ``doc_id``, else its own id."""
    return hit.doc_id or hit.id


def author_of(hit: Hit) -> str:
    """``metadata["author"]`` as text (a list of names joined by ``", "``); empty when absent."""
    raw = hit.metadata.get("author")
    if isinstance(raw, (list, tuple)):
        return ", ".join(str(a).strip() for a in raw if str(a).strip())
    return str(raw).strip() if raw else ""


def excerpt(text: str) -> str:
    """``text`` with whitespace collapsed, cut to :data:`EXCERPT_CHARS` (``...`` marks a cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 3].rstrip() + "..."


def build_bibliography(
    hits: Sequence[Hit], markers: Mapping[str, int], excerpts: Mapping[str, str] | None = None
) -> tuple[Source, ...]:
    """Every document of ``hits`` (best first) as a :class:`Source` (see the module docstring).

    Args:
        hits: the answer's items, best first.
        markers: document id → its marker, for the cited documents (numbered from 1 without gaps).
        excerpts: document id → the passage to show; a document without one shows the start of its best item.
    """
    groups: dict[str, list[Hit]] = {}
    for h in hits:
        groups.setdefault(document_id(h), []).append(h)
    chosen = excerpts or {}
    out = []
    for doc, members in groups.items():
        first = members[0]
        out.append(
            Source(
                id=doc, marker=markers.get(doc), item_ids=tuple(dict.fromkeys(h.id for h in members)),
                title=first.title, url=first.url, domain=first.domain, published_at=first.published_at,
                author=author_of(first), excerpt=excerpt(chosen.get(doc) or first.text),
            )
        )  # fmt: skip
    order = {doc: i for i, doc in enumerate(groups)}
    return tuple(sorted(out, key=lambda s: (s.marker is None, s.marker or 0, order[s.id])))
