"""Tests of the English stopword list used by the FTS5 keyword lane."""

from __future__ import annotations

import lanes.keyword.sqlite_fts.stopwords as mod
from lanes.keyword.sqlite_fts.stopwords import ENGLISH_STOPWORDS


def test_function_words_are_listed() -> None:
    """Articles, auxiliaries, wh-words and prepositions are in the list."""
    assert {"the", "a", "is", "are", "what", "how", "of", "in", "with"} <= ENGLISH_STOPWORDS


def test_topic_words_are_not() -> None:
    """Content words that carry a query's topic stay searchable."""
    assert not {"retrieval", "titles", "cancer", "system", "information", "find", "describe"} & ENGLISH_STOPWORDS


def test_direction_particles_stay_searchable() -> None:
    """'The service is down' is about an outage: up/down/out/off/over/under are not stopwords."""
    assert not {"up", "down", "out", "off", "over", "under", "above", "below"} & ENGLISH_STOPWORDS


def test_words_are_lower_case_tokens() -> None:
    """Every entry is a lower-case \\w+ token, as the lane's tokenizer produces them."""
    assert all(w.isalpha() and w == w.lower() for w in ENGLISH_STOPWORDS)


def test_all() -> None:
    assert mod.__all__ == ["ENGLISH_STOPWORDS"]
