"""Tests for fusion.sentences: where sentences end, the length cap, and work that grows linearly with the text."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from fusion import sentences
from fusion.sentences import MAX_SENTENCE_CHARS, split_sentences


def executed_lines(fn: Callable[..., Any], *args: Any) -> int:
    """How many Python lines ``fn(*args)`` executes (a deterministic measure of work, unlike a clock)."""
    count = 0

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        fn(*args)
    finally:
        sys.settrace(previous)
    return count


PROSE = (
    "Dr. Smith measured 2.5 mg. at 5 p.m. on Jan. 5 with J. R. Tolkien et al. in the U.S. It worked! "
    "Did it? See Fig. 3 for details... then go.\n"
)


class TestBoundaries:
    def test_public_api(self) -> None:
        """The module exports the splitter and its length cap."""
        assert set(sentences.__all__) == {"MAX_SENTENCE_CHARS", "split_sentences"}

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("Dr. Smith measured 2.5 mg. It worked! Did it?", ["Dr. Smith measured 2.5 mg.", "It worked!", "Did it?"]),
            ("J. R. R. Tolkien wrote it. Yes.", ["J. R. R. Tolkien wrote it.", "Yes."]),
            ("It was at 5 p.m. Then we left.", ["It was at 5 p.m.", "Then we left."]),
            ("Smith et al. found it. Yes.", ["Smith et al. found it.", "Yes."]),
            ("See Fig. 3 for details. Then go.", ["See Fig. 3 for details.", "Then go."]),
            ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
            ("Wait... what happened? Nothing!", ["Wait... what happened?", "Nothing!"]),
            ("The value is 3. The next is 4.", ["The value is 3.", "The next is 4."]),
            ("He lives in the U.S. He likes it.", ["He lives in the U.S.", "He likes it."]),
        ],
    )
    def test_abbreviations_initials_and_decimals(self, text: str, expected: list[str]) -> None:
        """Abbreviations, initials and decimals do not end a sentence; ``.``, ``!`` and ``?`` before one do."""
        assert split_sentences(text) == expected

    def test_lines(self) -> None:
        """Headings, list items and blank lines end sentences; a line break inside running text does not."""
        text = "# Title\n1. First item\n- second item\n\nHard-wrapped prose\ngoes on here. Done"
        assert split_sentences(text) == [
            "# Title", "1. First item", "- second item", "Hard-wrapped prose\ngoes on here.", "Done",
        ]  # fmt: skip

    def test_empty(self) -> None:
        """Blank text has no sentences."""
        assert split_sentences("  \n ") == []

    def test_long_runs_are_cut(self) -> None:
        """A run without a boundary is cut at whitespace before the cap; a longer token at the cap itself."""
        words = split_sentences("word " * 1000)
        assert all(len(s) <= MAX_SENTENCE_CHARS for s in words)
        assert " ".join(words) == ("word " * 1000).strip()
        assert [len(s) for s in split_sentences("x" * 2500)] == [1000, 1000, 500]


class TestLinearWork:
    @pytest.mark.parametrize(
        "unit",
        ["a. ", "a! ", "a) b) c) ", "e.g. ", "1. ", "... ", "x\n", PROSE],
        ids=["a-period", "a-bang", "letters-paren", "eg", "numbers", "ellipsis", "lines", "prose"],
    )
    def test_twice_the_text_is_twice_the_work(self, unit: str) -> None:
        """Doubling the text at most doubles the lines executed (the attack's ``"a. " * 6666`` took quadratic time,
        ``"a) b) c) "`` cubic, holding a core for minutes)."""
        n = 4_000 // len(unit) + 1
        small, large = executed_lines(split_sentences, unit * n), executed_lines(split_sentences, unit * 2 * n)
        assert large <= 2 * small + 50
