"""Tests for fabric.core.sources: the bibliography lists every source document, cited or not, once each."""

from __future__ import annotations

from datetime import UTC, datetime

from fabric.core import sources
from fabric.core.models import Hit
from fabric.core.sources import EXCERPT_CHARS, Source, author_of, build_bibliography, document_id, excerpt

KEYS = {"marker", "cited", "id", "item_ids", "title", "url", "domain", "published_at", "author", "excerpt"}


def hit(item_id: str, doc_id: str = "", text: str = "", **kw: object) -> Hit:
    """A hit of document ``doc_id`` (empty: the item is its own document)."""
    return Hit(id=item_id, rank=1, score=1.0, doc_id=doc_id, title=f"T {item_id}", text=text, **kw)  # type: ignore[arg-type]


class TestBuild:
    def test_public_api(self) -> None:
        """The module exports the entry, the builder and its helpers."""
        assert sorted(sources.__all__) == sorted(
            ["EXCERPT_CHARS", "Source", "author_of", "build_bibliography", "document_id", "excerpt"]
        )

    def test_every_document_once_cited_first(self) -> None:
        """Two chunks of one document are one entry; cited documents come first in marker order, then the rest in
        rank order."""
        hits = [hit("d1#a", "d1", "one"), hit("w", text="web"), hit("d1#b", "d1", "two"), hit("d2#a", "d2", "x")]
        got = build_bibliography(hits, {"d2": 1, "d1": 2}, {"d1": "the cited passage"})
        assert [(s.id, s.marker, s.cited, s.item_ids) for s in got] == [
            ("d2", 1, True, ("d2#a",)),
            ("d1", 2, True, ("d1#a", "d1#b")),
            ("w", None, False, ("w",)),
        ]
        assert got[1].excerpt == "the cited passage"
        assert got[2].excerpt == "web"  # no chosen passage: the start of the text

    def test_fields_and_json(self) -> None:
        """Each entry carries id, title, url, domain, published_at, author and excerpt, and says whether it is cited."""
        when = datetime(2026, 11, 2, tzinfo=UTC)
        h = hit("x", text="Body.", url="https://e.org/x", domain="e.org", published_at=when,
                metadata={"author": "Ada Lovelace"})  # fmt: skip
        (entry,) = build_bibliography([h], {})
        d = entry.to_dict()
        assert set(d) == KEYS
        assert d == {"marker": None, "cited": False, "id": "x", "item_ids": ["x"], "title": "T x",
                     "url": "https://e.org/x", "domain": "e.org", "published_at": "2026-11-02T00:00:00Z",
                     "author": "Ada Lovelace", "excerpt": "Body."}  # fmt: skip

    def test_no_hits(self) -> None:
        """No items, no sources."""
        assert build_bibliography([], {}) == ()


class TestHelpers:
    def test_document_id(self) -> None:
        """doc_id when the lane gives one, else the item's own id."""
        assert document_id(hit("c#1", "c")) == "c"
        assert document_id(hit("https://e.org/p")) == "https://e.org/p"

    def test_author(self) -> None:
        """A string, a list of names joined, or empty."""
        assert author_of(hit("a", metadata={"author": " Grace Hopper "})) == "Grace Hopper"
        assert author_of(hit("a", metadata={"author": ["A. B.", "", "C. D."]})) == "A. B., C. D."
        assert author_of(hit("a")) == ""

    def test_excerpt_is_bounded(self) -> None:
        """Whitespace collapsed, cut at EXCERPT_CHARS with an ellipsis."""
        assert excerpt("a\n  b") == "a b"
        long = excerpt("word " * 200)
        assert len(long) <= EXCERPT_CHARS
        assert long.endswith("...")

    def test_cited_property(self) -> None:
        """cited follows the marker."""
        assert Source(id="a", marker=3, item_ids=("a",)).cited
        assert not Source(id="a", marker=None, item_ids=("a",)).cited
