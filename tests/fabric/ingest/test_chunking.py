"""Tests of Markdown chunking and the date/year helpers."""

from __future__ import annotations

from datetime import UTC, datetime

import fabric.ingest.chunking as mod
from fabric.ingest.chunking import chunk_markdown, extract_years, parse_date, slugify, split_frontmatter

DOC = """# Title

Intro text.

## Short A
Alpha.

## Short B
Beta.

## Long
""" + ("word " * 600)


class TestChunkMarkdown:
    def test_short_sections_are_kept_together(self) -> None:
        """Consecutive short sections merge into one chunk under the cap."""
        secs = chunk_markdown(DOC, "Title", cap_chars=200, max_chars=400)
        assert "Alpha." in secs[0].text
        assert "Beta." in secs[0].text

    def test_long_sections_split_under_max(self) -> None:
        """No chunk exceeds max_chars; a long section yields several ordinal chunks."""
        secs = chunk_markdown(DOC, "Title", cap_chars=200, max_chars=400)
        assert all(len(s.text) <= 400 for s in secs)
        assert [s.chunk_id for s in secs if s.chunk_id.startswith("long")][:2] == ["long-0", "long-1"]

    def test_ids_are_stable_when_another_section_changes(self) -> None:
        """Editing one section leaves the chunk ids of the others unchanged."""
        before = [s.chunk_id for s in chunk_markdown(DOC, "Title", cap_chars=20)]
        after = [s.chunk_id for s in chunk_markdown(DOC.replace("Beta.", "Beta, edited."), "Title", cap_chars=20)]
        assert before == after

    def test_heading_path_is_recorded(self) -> None:
        """Each section knows its heading path."""
        secs = chunk_markdown("# T\n\n## A\n\n### B\ntext", "T", cap_chars=1)
        assert secs[-1].heading_path == ("T", "A", "B")

    def test_headings_in_code_fences_are_ignored(self) -> None:
        """A '#' line inside a fenced block is not a heading."""
        secs = chunk_markdown("# T\n\n```\n# not a heading\n```\n", "T")
        assert len(secs) == 1


class TestHelpers:
    def test_slugify_is_github_style(self) -> None:
        """Anchors are lowercase, punctuation-free, hyphenated."""
        assert slugify("DECISION: Use Qdrant!") == "decision-use-qdrant"

    def test_years_are_extracted(self) -> None:
        """Plausible years are found; version numbers and long numbers are not years."""
        assert extract_years("In 2019 and 2021, v1.2019.3, id 120190") == (2019, 2021)

    def test_parse_date_reads_file_names(self) -> None:
        """A YYYY-MM-DD in a name becomes a UTC datetime."""
        assert parse_date("2026-10-14-qdrant.md") == datetime(2026, 10, 14, tzinfo=UTC)
        assert parse_date("notes.md") is None

    def test_frontmatter_is_split(self) -> None:
        """Front matter keys are parsed and removed from the body."""
        meta, body = split_frontmatter('---\ntitle: "X"\ndate: 2026-01-02\n---\n# X\n')
        assert meta == {"title": "X", "date": "2026-01-02"}
        assert body == "# X\n"


def test_public_api() -> None:
    """The module's public names."""
    assert set(mod.__all__) == {
        "Section",
        "chunk_markdown",
        "extract_years",
        "parse_date",
        "slugify",
        "split_frontmatter",
    }
