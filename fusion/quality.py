"""Content quality of a document in [0, 1]: readability + completeness, computed once per document at ingest.

The ingestion code stores the value in :attr:`fabric.core.models.Hit.quality`; fusion never recomputes it per query.

Definition (all parts in [0, 1], every step deterministic)::

    quality      = 0.5 * readability + 0.5 * completeness
    readability  = mean(plateau(words_per_sentence; 8, 12, 28, 60),
                        plateau(chars_per_word;     2, 4,  7, 12),
                        alpha_ratio)
    completeness = 0.25 * [title is non-empty]
                 + 0.50 * min(1, words / 120)
                 + 0.25 * [text ends with . ! ? or a closing quote/bracket after one]

``plateau(x; a, b, c, d)`` is 0 below ``a``, rises linearly to 1 at ``b``, stays 1 up to ``c`` and falls
linearly to 0 at ``d``: prose with 12–28 words per sentence and 4–7 letters per word reads well; fragments,
run-on blobs, tables of numbers and markup do not. ``alpha_ratio`` is the share of non-space characters that
are letters (boilerplate, code dumps and number tables score low). Sentences are counted with a terminal
punctuation regex (cheap enough to run over a whole corpus; citations use a real splitter). Empty text scores
0 readability; a document with neither title nor text scores 0.
"""

from __future__ import annotations

import re

__all__ = ["completeness", "content_quality", "readability"]

_WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")
_SENTENCE_END = re.compile(r"[.!?]+(?=\s|$)")
_ENDS_WELL = re.compile(r"[.!?][\"'”’)\]]*\s*$")


def _plateau(x: float, a: float, b: float, c: float, d: float) -> float:
    if x <= a or x >= d:
        return 0.0
    if x < b:
        return (x - a) / (b - a)
    if x <= c:
        return 1.0
    return (d - x) / (d - c)


def readability(text: str) -> float:
    """Readability in [0, 1] from sentence length, word length and the share of letters (see module doc)."""
    words = _WORD.findall(text)
    if not words:
        return 0.0
    sentences = max(1, len(_SENTENCE_END.findall(text)))
    wps = len(words) / sentences
    cpw = sum(len(w) for w in words) / len(words)
    visible = sum(1 for ch in text if not ch.isspace())
    alpha = sum(1 for ch in text if ch.isalpha()) / visible if visible else 0.0
    return (_plateau(wps, 8, 12, 28, 60) + _plateau(cpw, 2, 4, 7, 12) + alpha) / 3.0


def completeness(title: str, text: str) -> float:
    """Completeness in [0, 1]: a title, enough body (120 words saturate) and a finished last sentence."""
    score = 0.25 if title.strip() else 0.0
    score += 0.5 * min(1.0, len(_WORD.findall(text)) / 120.0)
    if _ENDS_WELL.search(text):
        score += 0.25
    return score


def content_quality(title: str, text: str) -> float:
    """Content quality in [0, 1]: ``0.5 * readability(text) + 0.5 * completeness(title, text)``, 4 decimals."""
    return round(0.5 * readability(text) + 0.5 * completeness(title, text), 4)
