"""Disagreement between passages cited for the same sentence: contradicting numbers or dates, opposite polarity.

Two passages ``a`` and ``b`` cited for sentence ``s`` disagree about a *term* ``t`` when ``t`` is a content word
(not a number, not a negation cue) of ``s`` found in both passages and either

- ``numbers``: both passages state numbers near ``t`` (within 6 tokens of an occurrence) and the two sets of
  values share no value: "mortality fell by 25%" vs "mortality fell by 12%";
- ``dates``: both passages state dates near ``t`` and no date of one falls within a date of the other: an ISO
  date (``2026-10-10``) is that day, a year (a four-digit whole number from 1900 to 2100) is the whole year, so
  "accepted on 2026-09-01" vs "accepted on 2026-10-10" differ and "in 2026" vs "on 2026-10-10" agree; dates
  and years are not numbers for the ``numbers`` rule;
- ``negation``: one passage negates ``t`` at every occurrence (a cue such as *not*, *no*, *never*, *without*,
  *failed* within the 3 tokens before it) while the other never does: "did not reduce mortality" vs
  "reduced mortality".

**Severity** (``low`` < ``medium`` < ``high``), by kind and by the size of the difference:

- ``negation`` is ``high``: one source asserts what the other denies;
- ``numbers``: with ``r`` the smallest relative difference ``|x - y| / max(|x|, |y|)`` between a value of ``a``
  and a value of ``b``, ``high`` when ``r ≥ 0.5`` (25 vs 12), ``medium`` when ``0.1 ≤ r < 0.5`` (25 vs 20),
  ``low`` below (100 vs 95);
- ``dates``: ``medium`` when the closest dates are a year (365 days) or more apart, else ``low``: differing dates
  more often date different events or versions (a rule replaced later) than contradict each other.

**Topic**: the content words of the sentence found in both passages (numbers and negation cues left out), in the
sentence's order, at most 6, joined by spaces: what both sources talk about ("aspirin mortality adult").

One disagreement is reported per passage pair: the most severe of the three kinds, on a tie ``numbers`` before
``negation`` before ``dates``; within a kind, the alphabetically first term.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from fusion.text import NEGATIONS, content_words, is_number, normalise_word, parse_number, tokens

__all__ = ["KINDS", "SEVERITIES", "Disagreement", "find_disagreements"]

KINDS = ("numbers", "dates", "negation")
"""The kinds of disagreement."""
SEVERITIES = ("low", "medium", "high")
"""The severities, least severe first."""

_NUMBER_WINDOW = 6
_NEGATION_WINDOW = 3
_TOPIC_WORDS = 6
_SEVERITY = {name: rank for rank, name in enumerate(SEVERITIES)}
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_DATE_TOKEN = re.compile(r"^date(\d{4})(\d{2})(\d{2})$")
_YEARS = (1900, 2100)

Span = tuple[int, int]
"""A date as an interval of proleptic Gregorian ordinals (first day, last day)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Disagreement:
    """A conflict between two passages cited for one sentence."""

    sentence: int
    """0-based index of the answer sentence."""
    markers: tuple[int, int]
    """Bibliography markers of the two passages (ascending)."""
    kind: str
    """``numbers``, ``dates`` or ``negation``."""
    term: str
    """The shared term the passages disagree about."""
    detail: str
    """What each side says, e.g. ``[1] 25 vs [2] 12`` or ``[2] negates``."""
    topic: str = ""
    """What both passages talk about: the sentence's content words found in both (see the module docstring)."""
    severity: str = "low"
    """``low``, ``medium`` or ``high`` (see the module docstring)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"sentence": self.sentence, "markers": list(self.markers), "kind": self.kind, "term": self.term,
                "topic": self.topic, "severity": self.severity, "detail": self.detail}  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Profile:
    marker: int
    words: frozenset[str]
    numbers: dict[str, set[float]]
    dates: dict[str, set[Span]]
    polarity: dict[str, str]


def _iso_token(m: re.Match[str]) -> str:
    return f" date{int(m[1]):04d}{int(m[2]):02d}{int(m[3]):02d} "


def _date_span(token: str) -> Span | None:
    """The interval a date token (an ISO date rewritten by :func:`_iso_token`, or a year) covers; None otherwise."""
    m = _DATE_TOKEN.match(token)
    try:
        if m:
            day = date(int(m[1]), int(m[2]), int(m[3])).toordinal()
            return day, day
        if len(token) == 4 and token.isdigit() and _YEARS[0] <= int(token) <= _YEARS[1]:
            return date(int(token), 1, 1).toordinal(), date(int(token), 12, 31).toordinal()
    except ValueError:  # 2026-02-30: not a date
        return None
    return None


def _profile(marker: int, passage: str, terms: frozenset[str]) -> _Profile:
    toks = tokens(_ISO_DATE.sub(_iso_token, passage))
    words = [normalise_word(t) for t in toks]
    spans = [_date_span(t) for t in toks]
    values = [parse_number(t) if is_number(t) and s is None else None for t, s in zip(toks, spans, strict=True)]
    numbers: dict[str, set[float]] = {}
    dates: dict[str, set[Span]] = {}
    polarity: dict[str, set[bool]] = {}
    for i, w in enumerate(words):
        if w not in terms:
            continue
        lo, hi = max(0, i - _NUMBER_WINDOW), i + _NUMBER_WINDOW + 1
        near = {v for v in values[lo:hi] if v is not None}
        if near:
            numbers.setdefault(w, set()).update(near)
        when = {s for s in spans[lo:hi] if s is not None}
        if when:
            dates.setdefault(w, set()).update(when)
        negated = any(t in NEGATIONS for t in toks[max(0, i - _NEGATION_WINDOW) : i])
        polarity.setdefault(w, set()).add(negated)
    pol = {w: ("negated" if v == {True} else "asserted" if v == {False} else "mixed") for w, v in polarity.items()}
    return _Profile(marker, frozenset(words), numbers, dates, pol)


Found = tuple[str, str, str, str]
"""(kind, term, severity, detail) of one pair's disagreement of one kind."""


def _numbers(a: _Profile, b: _Profile) -> Found | None:
    clash = sorted(t for t in a.numbers.keys() & b.numbers.keys() if not a.numbers[t] & b.numbers[t])
    if not clash:
        return None
    t = clash[0]
    r = min(abs(x - y) / max(abs(x), abs(y)) for x in a.numbers[t] for y in b.numbers[t])
    severity = "high" if r >= 0.5 else "medium" if r >= 0.1 else "low"
    return "numbers", t, severity, f"[{a.marker}] {_fmt(a.numbers[t])} vs [{b.marker}] {_fmt(b.numbers[t])}"


def _dates(a: _Profile, b: _Profile) -> Found | None:
    def gap(x: Span, y: Span) -> int:
        return max(y[0] - x[1], x[0] - y[1], 0)

    clash = sorted(
        t for t in a.dates.keys() & b.dates.keys() if all(gap(x, y) > 0 for x in a.dates[t] for y in b.dates[t])
    )
    if not clash:
        return None
    t = clash[0]
    days = min(gap(x, y) for x in a.dates[t] for y in b.dates[t])
    detail = f"[{a.marker}] {_fmt_dates(a.dates[t])} vs [{b.marker}] {_fmt_dates(b.dates[t])}"
    return "dates", t, "medium" if days >= 365 else "low", detail


def _negation(a: _Profile, b: _Profile) -> Found | None:
    shared = a.polarity.keys() & b.polarity.keys()
    flips = sorted(t for t in shared if {a.polarity[t], b.polarity[t]} == {"negated", "asserted"})
    if not flips:
        return None
    t = flips[0]
    neg = a.marker if a.polarity[t] == "negated" else b.marker
    return "negation", t, "high", f"[{neg}] negates {t!r}"


def _topic(sentence: str, terms: frozenset[str], a: _Profile, b: _Profile) -> str:
    shared = (normalise_word(w) for w in tokens(sentence))
    words = dict.fromkeys(w for w in shared if w in terms and w in a.words and w in b.words)
    return " ".join(list(words)[:_TOPIC_WORDS])


def find_disagreements(sentence_index: int, sentence: str, cited: Sequence[tuple[int, str]]) -> list[Disagreement]:
    """Disagreements among ``cited`` ``(marker, passage)`` pairs for one sentence (see the module docstring)."""
    if len(cited) < 2:
        return []
    terms = frozenset(w for w in content_words(sentence) if not is_number(w) and w not in NEGATIONS)
    profiles = sorted((_profile(m, p, terms) for m, p in cited), key=lambda pr: pr.marker)
    out: list[Disagreement] = []
    for x, a in enumerate(profiles):
        for b in profiles[x + 1 :]:
            found = [f for f in (_numbers(a, b), _negation(a, b), _dates(a, b)) if f is not None]
            if not found:
                continue
            kind, term, severity, detail = max(found, key=lambda f: _SEVERITY[f[2]])  # first of the most severe
            out.append(Disagreement(sentence=sentence_index, markers=(a.marker, b.marker), kind=kind, term=term,
                                    detail=detail, topic=_topic(sentence, terms, a, b), severity=severity))  # fmt: skip
    return out


def _fmt(values: set[float]) -> str:
    return ", ".join(f"{v:g}" for v in sorted(values))


def _fmt_dates(spans: set[Span]) -> str:
    def one(s: Span) -> str:
        first = date.fromordinal(s[0])
        return first.isoformat() if s[0] == s[1] else str(first.year)

    return ", ".join(one(s) for s in sorted(spans))
