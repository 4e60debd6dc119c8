"""Citation alignment (the fusion policy): answer sentences → supporting passages, ``[n]`` markers, bibliography.

1. The answer is split into sentences with pysbd (abbreviations, decimals and initials do not end a sentence).
2. Every item's text is split the same way; each sentence of an item is a *passage*.
3. ``similarity(sentences, passages)`` gives a score matrix. It is injected: with an embedder, pass cosine of
   embeddings (:func:`embedding_similarity`); without one, :func:`lexical_similarity` is used.
4. A sentence cites the passages scoring ≥ ``threshold`` (0.7), at most one per item, best first, at most
   ``max_per_sentence`` (3); ties go to the better-ranked item.
5. Items are numbered in the order they are first cited (the bibliography order); the marker ``[n]`` is
   inserted before the sentence's final punctuation.
6. Disagreements between passages cited for the same sentence are detected by :mod:`fusion.disagree`.

Lexical similarity is the *containment* of the sentence's content words in the passage:
``|W(s) ∩ W(p)| / |W(s)|``, where ``W`` is :func:`fusion.text.content_words` (lower-cased words and numbers
minus a short stop-word list, plural ``s`` stripped). It answers "how much of what the
sentence says appears in the passage", which is what a citation claims; a sentence without content words
cites nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fabric.core.models import Embedder, Hit, iso_utc
from fusion.disagree import Disagreement, find_disagreements
from fusion.text import content_words

__all__ = [
    "Citation",
    "CitationResult",
    "CitedSentence",
    "Similarity",
    "align_citations",
    "content_words",
    "embedding_similarity",
    "lexical_similarity",
    "split_sentences",
]

Similarity = Callable[[Sequence[str], Sequence[str]], Sequence[Sequence[float]]]
"""``similarity(sentences, passages)`` → matrix ``[len(sentences)][len(passages)]`` of scores in [0, 1]."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Citation:
    """One passage cited for one sentence."""

    marker: int
    """Bibliography number ``n`` of the cited item."""
    item_id: str
    """Id of the cited item."""
    passage: str
    """The supporting passage (a sentence of the item's text)."""
    similarity: float
    """Sentence–passage similarity (≥ the threshold)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CitedSentence:
    """One answer sentence and its citations."""

    text: str
    """The sentence as split from the answer."""
    citations: tuple[Citation, ...]
    """At most ``max_per_sentence`` citations, best first."""
    confidence: float
    """Best similarity over all passages (0 when there are none), cited or not."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CitationResult:
    """Sentences with citations, the annotated answer, the bibliography and the disagreements."""

    text: str
    """The answer with ``[n]`` markers inserted."""
    sentences: tuple[CitedSentence, ...]
    """Every answer sentence in order."""
    bibliography: tuple[Hit, ...]
    """Cited items, ``bibliography[n - 1]`` is marker ``n``."""
    disagreements: tuple[Disagreement, ...]
    """Conflicts between passages cited for the same sentence."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape printed by ``fabric cite --json``."""
        return {
            "text": self.text,
            "sentences": [
                {
                    "text": s.text,
                    "confidence": round(s.confidence, 4),
                    "citations": [
                        {
                            "marker": c.marker,
                            "id": c.item_id,
                            "similarity": round(c.similarity, 4),
                            "passage": c.passage,
                        }
                        for c in s.citations
                    ],
                }
                for s in self.sentences
            ],
            "bibliography": [
                {
                    "marker": n,
                    "id": h.id,
                    "title": h.title,
                    "url": h.url,
                    "domain": h.domain,
                    "published_at": iso_utc(h.published_at),
                }
                for n, h in enumerate(self.bibliography, 1)
            ],
            "disagreements": [d.to_dict() for d in self.disagreements],
        }


def split_sentences(text: str) -> list[str]:
    """Split text into sentences with pysbd (English rules), dropping empty pieces."""
    import pysbd  # imported where used: keeps `import fusion` light

    segmenter = pysbd.Segmenter(language="en", clean=False)
    return [s.strip() for s in segmenter.segment(text) if s.strip()]


def lexical_similarity(sentences: Sequence[str], passages: Sequence[str]) -> list[list[float]]:
    """Containment of each sentence's content words in each passage (see the module docstring)."""
    ps = [content_words(p) for p in passages]
    rows = []
    for s in sentences:
        ws = content_words(s)
        rows.append([len(ws & p) / len(ws) if ws else 0.0 for p in ps])
    return rows


def embedding_similarity(embedder: Embedder) -> Similarity:
    """A :data:`Similarity` from an embedder: cosine of unit vectors, clipped to [0, 1]."""

    def similarity(sentences: Sequence[str], passages: Sequence[str]) -> list[list[float]]:
        vectors = embedder.embed([*sentences, *passages])
        sv, pv = vectors[: len(sentences)], vectors[len(sentences) :]
        return [[max(0.0, min(1.0, math.fsum(a * b for a, b in zip(s, p, strict=True)))) for p in pv] for s in sv]

    return similarity


def _with_markers(sentence: str, markers: Sequence[int]) -> str:
    if not markers:
        return sentence
    tags = "".join(f"[{n}]" for n in markers)
    m = re.search(r"[.!?…]+[\"'”’)]*$", sentence)
    cut = m.start() if m else len(sentence)
    return f"{sentence[:cut].rstrip()} {tags}{sentence[cut:]}"


def align_citations(
    answer: str,
    items: Sequence[Hit],
    *,
    similarity: Similarity | None = None,
    threshold: float = 0.7,
    max_per_sentence: int = 3,
) -> CitationResult:
    """Align ``answer`` with ``items`` (best first): citations, markers, bibliography and disagreements."""
    if max_per_sentence < 1:
        raise ValueError("max_per_sentence must be >= 1")
    sentences = split_sentences(answer)
    owners: list[int] = []
    passages: list[str] = []
    for k, item in enumerate(items):
        for p in split_sentences(item.text) if item.text.strip() else []:
            owners.append(k)
            passages.append(p)
    matrix = (similarity or lexical_similarity)(sentences, passages) if sentences and passages else []
    numbers: dict[int, int] = {}
    cited: list[CitedSentence] = []
    for si, sentence in enumerate(sentences):
        row = list(matrix[si]) if passages else []
        best: dict[int, tuple[float, int]] = {}
        for pi, score in enumerate(row):
            k = owners[pi]
            if score >= threshold and (k not in best or score > best[k][0]):
                best[k] = (float(score), pi)
        chosen = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[0]))[:max_per_sentence]
        cites = []
        for k, (score, pi) in chosen:
            n = numbers.setdefault(k, len(numbers) + 1)
            cites.append(Citation(marker=n, item_id=items[k].id, passage=passages[pi], similarity=score))
        cited.append(CitedSentence(text=sentence, citations=tuple(cites), confidence=float(max(row, default=0.0))))
    text = " ".join(_with_markers(s.text, sorted(c.marker for c in s.citations)) for s in cited)
    bibliography = tuple(items[k] for k, _ in sorted(numbers.items(), key=lambda kv: kv[1]))
    disagreements = tuple(
        d
        for si, s in enumerate(cited)
        for d in find_disagreements(si, s.text, [(c.marker, c.passage) for c in s.citations])
    )
    return CitationResult(text=text, sentences=tuple(cited), bibliography=bibliography, disagreements=disagreements)
