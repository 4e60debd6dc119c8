"""Directed semantic relations for the graph (the router policy): a rule-based verb-pattern extractor and user triples.

The router policy asks for a lightweight relation-extraction model (REBEL, a GLiNER relation model); their weights
cannot
be fetched here, so :func:`verb_triples` reads ``Entity --predicate--> Entity`` edges from the words between two
neighbouring entities of a sentence:

- the gap holds at most :data:`MAX_GAP_WORDS` words and one verb of :data:`RELATION_VERBS` in any inflection
  (``increases``, ``increased``, ``increasing``); the predicate is the verb's base form, with a following
  particle kept (``leads to`` → ``lead_to``, ``associated with`` → ``associate_with``);
- active voice gives ``(left, verb, right)``; the passive ``is/are/was/were/been <verb>ed by`` gives
  ``(right, verb, left)`` (``X is inhibited by Y`` → ``Y --inhibit--> X``);
- a negation in the gap (``not``, ``no``, ``never``, ``without``, ``fails to``) yields no edge.

:func:`supplied_triples` turns triples given at ingest (the JSONL ``triples`` field, kept in the chunk's metadata)
into the same normalised form, so user knowledge and extracted knowledge share one graph.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

__all__ = ["MAX_GAP_WORDS", "RELATION_VERBS", "Span", "supplied_triples", "verb_triples"]

MAX_GAP_WORDS = 6
"""Longest gap (in words) between two entities that a verb pattern may link."""

_VERBS_TEXT = """
    activate affect alter attenuate bind block cause contain control decrease degrade depend develop disrupt elevate
    encode enhance express impair improve include increase induce influence inhibit lead limit lower mediate modulate
    predict prevent produce promote protect raise reduce regulate repress require reverse stimulate suppress target
    trigger acquire replace support associate correlate link interact
    """
RELATION_VERBS = frozenset(_VERBS_TEXT.split())
"""Base forms of the verbs that make a relation edge."""

_PARTICLES = frozenset({"to", "with", "by", "in", "on", "from", "into"})
_NEGATIONS = frozenset({"not", "no", "never", "without", "fails", "failed", "cannot", "nor"})
_BE = frozenset({"is", "are", "was", "were", "been", "be", "being"})
_WORD = re.compile(r"[A-Za-z]+")

Span = tuple[int, int, str]
"""An entity occurrence in a sentence: ``(start, end, normalised name)``."""


@functools.lru_cache(maxsize=1 << 16)
def _lemma(word: str) -> str | None:
    """The base form of ``word`` when it is an inflection of a relation verb, else None (memoised: a corpus repeats
    its words, and this ran ~60 times per chunk)."""
    w = word.lower()
    stems = {w}
    for suffix in ("ies", "es", "s", "ed", "d", "ing"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            stem = w[: -len(suffix)]
            stems |= {stem, stem + ("y" if suffix == "ies" else "e")}
            if stem[-1] == stem[-2]:  # controlled → control
                stems.add(stem[:-1])
    return next((c for c in sorted(stems) if c in RELATION_VERBS), None)


@functools.lru_cache(maxsize=1 << 16)
def _names_verb(name: str) -> bool:
    """Whether an entity name holds a relation verb (memoised like :func:`_lemma`)."""
    return any(_lemma(w) for w in name.split())


@functools.lru_cache(maxsize=1 << 16)
def _relation(gap: str) -> tuple[str, bool] | None:
    """The predicate the words of ``gap`` state and whether it is passive, or None (memoised: the short gaps
    between entities, `` and ``, `` in the ``, repeat across a corpus)."""
    words = _WORD.findall(gap)
    if not words or len(words) > MAX_GAP_WORDS or any(w.lower() in _NEGATIONS for w in words):
        return None
    for i, word in enumerate(words):
        lemma = _lemma(word)
        if lemma is None:
            continue
        rest = [w.lower() for w in words[i + 1 :]]
        passive = i > 0 and words[i - 1].lower() in _BE and word.lower().endswith("ed") and rest[:1] == ["by"]
        if passive:
            return lemma, True
        particle = rest[0] if rest and rest[0] in _PARTICLES else ""
        return (f"{lemma}_{particle}" if particle else lemma), False
    return None


def verb_triples(sentence: str, spans: Sequence[Span]) -> list[tuple[str, str, str]]:
    """Directed triples between neighbouring entities of ``sentence`` (see the module docstring): each entity with
    the entities that start first after it ends. Entities holding a relation verb (the bigram ``increases risk``)
    are not linked: their verb belongs to the gap."""
    ordered = sorted(s for s in spans if not _names_verb(s[2]))
    starts = [s[0] for s in ordered]
    out: dict[tuple[str, str, str], None] = {}
    for _, end, left in ordered:
        at = bisect.bisect_left(starts, end)  # ordered by start: the entities after ``left`` are a suffix
        if at == len(ordered):
            continue
        first = starts[at]
        found = _relation(sentence[end:first])
        if found is None:
            continue
        predicate, passive = found
        for right in (s[2] for s in ordered[at:] if s[0] == first and s[2] != left):
            out[(right, predicate, left) if passive else (left, predicate, right)] = None
    return list(out)


def supplied_triples(
    raw: Iterable[Any], normalize: Callable[[str], str]
) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """Entities (``normalised → label``) and normalised triples from ingest-time ``[subject, predicate, object]``
    rows; a predicate is lower-cased with spaces as ``_``. Rows that are not three non-empty strings are skipped
    (the loader has already refused them)."""
    entities: dict[str, str] = {}
    triples: list[tuple[str, str, str]] = []
    for row in raw:
        if not (isinstance(row, list | tuple) and len(row) == 3 and all(isinstance(x, str) and x.strip() for x in row)):
            continue
        subj, pred, obj = (str(x).strip() for x in row)
        s, o = normalize(subj), normalize(obj)
        predicate = "_".join(pred.lower().split())
        if s and o and predicate:
            entities.setdefault(s, subj)
            entities.setdefault(o, obj)
            triples.append((s, predicate, o))
    return entities, triples
