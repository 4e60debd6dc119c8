"""Tests for fusion.text helpers."""

from __future__ import annotations

from fusion import text
from fusion.text import content_words, is_number, parse_number, tokens


class TestText:
    def test_public_api(self) -> None:
        """The module exports its helpers."""
        assert "content_words" in text.__all__

    def test_tokens_keep_decimals(self) -> None:
        """Decimals and percentages stay one token."""
        assert tokens("Dose 2.5 mg, 30% better") == ["dose", "2.5", "mg", "30%", "better"]

    def test_content_words(self) -> None:
        """Stop words go and plurals are stripped."""
        assert content_words("The trials of the class") == {"trial", "class"}

    def test_numbers(self) -> None:
        """Number tokens parse with thousands and decimal commas."""
        assert is_number("1,000")
        assert (parse_number("1,000"), parse_number("0,7"), parse_number("30%")) == (1000.0, 0.7, 30.0)
