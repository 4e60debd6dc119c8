"""Small text helpers shared by citation alignment, disagreement detection and dedup (no I/O, no models).

Tokens are lower-cased ``\\w+`` runs, with decimals kept whole (``2.5``, ``0,7``); a content word is a token
that is not a stop word, with a plural ``s`` stripped from words longer than 3 letters (``trials`` → ``trial``,
``class`` kept).
"""

from __future__ import annotations

import re
import zlib

__all__ = [
    "NEGATIONS", "STOP_WORDS", "content_words", "is_number", "normalise_word", "parse_number", "title_key", "tokens",
]  # fmt: skip

_TOKEN = re.compile(r"\d+(?:[.,]\d+)*%?|\w+")
_NUMBER = re.compile(r"^\d+(?:[.,]\d+)*%?$")

STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "they",
        "them",
        "their",
        "we",
        "our",
        "you",
        "your",
        "he",
        "she",
        "his",
        "her",
        "i",
        "me",
        "my",
        "which",
        "who",
        "whom",
        "what",
        "when",
        "where",
        "how",
        "than",
        "then",
        "there",
        "here",
        "so",
        "such",
        "can",
        "could",
        "may",
        "might",
        "will",
        "would",
        "shall",
        "should",
        "do",
        "does",
        "did",
        "has",
        "have",
        "had",
        "not",
        "no",
        "also",
        "into",
        "about",
        "over",
        "under",
        "more",
        "most",
        "less",
        "very",
        "just",
        "only",
        "other",
        "some",
        "any",
        "each",
        "all",
        "both",
    ]
)
"""Words that carry no claim of their own."""

NEGATIONS = frozenset(
    [
        "not",
        "no",
        "never",
        "none",
        "nothing",
        "neither",
        "nor",
        "cannot",
        "without",
        "doesn",
        "don",
        "didn",
        "isn",
        "aren",
        "wasn",
        "weren",
        "won",
        "hasn",
        "haven",
        "hadn",
        "fail",
        "fails",
        "failed",
        "lack",
        "lacks",
        "lacked",
    ]
)
"""Cues that negate the words right after them (``doesn't`` tokenises to ``doesn`` + ``t``)."""


def tokens(text: str) -> list[str]:
    """Lower-cased word and number tokens in order."""
    return _TOKEN.findall(text.casefold())


def normalise_word(w: str) -> str:
    """Strip a plural ``s`` from words longer than 3 letters (not from ``ss`` endings or numbers)."""
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss") and not w[0].isdigit():
        return w[:-1]
    return w


def content_words(text: str) -> frozenset[str]:
    """Normalised tokens of ``text`` minus stop words (numbers included)."""
    return frozenset(normalise_word(w) for w in tokens(text) if w not in STOP_WORDS)


def is_number(token: str) -> bool:
    """Whether a token is a number (``12``, ``2.5``, ``1,000``, ``30%``)."""
    return bool(_NUMBER.match(token))


def parse_number(token: str) -> float:
    """Value of a number token: ``1,000`` → 1000, ``0,7`` → 0.7, ``30%`` → 30."""
    t = token.rstrip("%")
    if "," in t:
        head, _, tail = t.partition(",")
        t = t.replace(",", "") if len(tail.split(",")[0].split(".")[0]) == 3 else f"{head}.{tail}"
    return float(t)


def _word_order(word: str) -> tuple[int, str]:
    return zlib.crc32(word.encode()), word


def title_key(title: str) -> str:
    """A title's word set as dedup compares it: case-folded words, unique, in a fixed order, space-separated.

    The order is by CRC-32 of the word (ties by the word): any fixed order keeps dedup's prefix filter exact, and
    a hash order spreads the words that start keys evenly (alphabetical order would pile up the "smallest"
    words). Computed once per document at ingest (:attr:`fabric.core.models.Hit.title_key`); dedup probes the first
    words of the key.
    """
    return " ".join(sorted(set(title.casefold().split()), key=_word_order))
