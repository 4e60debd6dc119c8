"""Disagreement between passages cited for the same sentence: contradicting numbers or opposite polarity.

Two passages ``a`` and ``b`` cited for sentence ``s`` disagree about a *term* ``t`` when ``t`` is a content word
(not a number, not a negation cue) of ``s`` found in both passages and either

- ``numbers``: both passages state numbers near ``t`` (within 6 tokens of an occurrence) and the two sets of
  values share no value: "mortality fell by 25%" vs "mortality fell by 12%";
- ``negation``: one passage negates ``t`` at every occurrence (a cue such as *not*, *no*, *never*, *without*,
  *failed* within the 3 tokens before it) while the other never does: "did not reduce mortality" vs
  "reduced mortality".

One disagreement is reported per passage pair (numbers first, then the alphabetically first term).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fusion.text import NEGATIONS, content_words, is_number, normalise_word, parse_number, tokens

__all__ = ["Disagreement", "find_disagreements"]

_NUMBER_WINDOW = 6
_NEGATION_WINDOW = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class Disagreement:
    """A conflict between two passages cited for one sentence."""

    sentence: int
    """0-based index of the answer sentence."""
    markers: tuple[int, int]
    """Bibliography markers of the two passages (ascending)."""
    kind: str
    """``numbers`` or ``negation``."""
    term: str
    """The shared term the passages disagree about."""
    detail: str
    """What each side says, e.g. ``[1] 25 vs [2] 12`` or ``[2] negates``."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"sentence": self.sentence, "markers": list(self.markers), "kind": self.kind, "term": self.term,
                "detail": self.detail}  # fmt: skip


def _profile(passage: str, terms: frozenset[str]) -> tuple[dict[str, set[float]], dict[str, str]]:
    toks = tokens(passage)
    words = [normalise_word(t) for t in toks]
    numbers: dict[str, set[float]] = {}
    polarity: dict[str, set[bool]] = {}
    for i, w in enumerate(words):
        if w not in terms:
            continue
        lo, hi = max(0, i - _NUMBER_WINDOW), i + _NUMBER_WINDOW + 1
        near = {parse_number(t) for t in toks[lo:hi] if is_number(t)}
        if near:
            numbers.setdefault(w, set()).update(near)
        negated = any(t in NEGATIONS for t in toks[max(0, i - _NEGATION_WINDOW) : i])
        polarity.setdefault(w, set()).add(negated)
    pol = {w: ("negated" if v == {True} else "asserted" if v == {False} else "mixed") for w, v in polarity.items()}
    return numbers, pol


def find_disagreements(sentence_index: int, sentence: str, cited: Sequence[tuple[int, str]]) -> list[Disagreement]:
    """Disagreements among ``cited`` ``(marker, passage)`` pairs for one sentence (see the module docstring)."""
    if len(cited) < 2:
        return []
    terms = frozenset(w for w in content_words(sentence) if not is_number(w) and w not in NEGATIONS)
    profiles = [(m, *_profile(p, terms)) for m, p in cited]
    out: list[Disagreement] = []
    for x in range(len(profiles)):
        for y in range(x + 1, len(profiles)):
            (ma, na, pa), (mb, nb, pb) = sorted((profiles[x], profiles[y]), key=lambda t: t[0])
            clash = sorted(t for t in na.keys() & nb.keys() if not na[t] & nb[t])
            if clash:
                t = clash[0]
                detail = f"[{ma}] {_fmt(na[t])} vs [{mb}] {_fmt(nb[t])}"
                out.append(Disagreement(sentence=sentence_index, markers=(ma, mb), kind="numbers", term=t,
                                        detail=detail))  # fmt: skip
                continue
            flips = sorted(t for t in pa.keys() & pb.keys() if {pa[t], pb[t]} == {"negated", "asserted"})
            if flips:
                t = flips[0]
                neg = ma if pa[t] == "negated" else mb
                out.append(Disagreement(sentence=sentence_index, markers=(ma, mb), kind="negation", term=t,
                                        detail=f"[{neg}] negates {t!r}"))  # fmt: skip
    return out


def _fmt(values: set[float]) -> str:
    return ", ".join(f"{v:g}" for v in sorted(values))
