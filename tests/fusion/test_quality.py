"""Tests for fusion.quality: readability, completeness, content_quality."""

from __future__ import annotations

from fusion import quality
from fusion.quality import completeness, content_quality, readability

PROSE = (
    "Aspirin reduces the risk of heart attack in adults with known cardiovascular disease. "
    "The effect was measured in a randomised trial with twelve thousand participants over five years. "
    "Bleeding events were more frequent in the treatment group, which limits its use for primary prevention."
)


class TestQuality:
    def test_public_api(self) -> None:
        """The module exports exactly its public functions."""
        assert sorted(quality.__all__) == ["completeness", "content_quality", "readability"]

    def test_empty_document_scores_zero(self) -> None:
        """A document with neither title nor text has quality 0."""
        assert content_quality("", "") == 0.0

    def test_range_is_unit_interval(self) -> None:
        """Quality stays within [0, 1] for prose, junk and long text."""
        for title, text in [("t", PROSE), ("", "1 2 3 | 4 5 | ## $$"), ("t", PROSE * 20), ("", "word")]:
            assert 0.0 <= content_quality(title, text) <= 1.0

    def test_prose_beats_number_table(self) -> None:
        """Well-formed prose reads better than a table of numbers and symbols."""
        assert readability(PROSE) > readability("12 | 13.5 | 77 || 0.1 -- 99 | 3 |")

    def test_title_adds_completeness(self) -> None:
        """A title adds a quarter of completeness."""
        assert completeness("Aspirin", PROSE) - completeness("", PROSE) == 0.25

    def test_truncated_text_is_less_complete(self) -> None:
        """Text cut mid-sentence loses the finished-sentence part."""
        assert completeness("t", PROSE) > completeness("t", PROSE[:-1] + " and")

    def test_deterministic(self) -> None:
        """The same document always gets the same value."""
        assert content_quality("Aspirin", PROSE) == content_quality("Aspirin", PROSE)
