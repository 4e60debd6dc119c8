"""Citation alignment (the fusion policy): answer sentences → supporting passages, ``[n]`` markers, bibliography.

1. The answer is split into sentences by :func:`fusion.sentences.split_sentences` (linear time; abbreviations,
   decimals and initials do not end a sentence).
2. Every item's text is split the same way; each sentence of an item is a *passage*.
3. ``similarity(sentences, passages)`` gives a score matrix. It is injected: with an embedder, pass cosine of
   embeddings (:func:`embedding_similarity`); without one, :func:`lexical_similarity` is used.
4. A sentence cites the passages scoring ≥ ``threshold`` (0.7), at most one per source document (an item's
   ``doc_id``, else its id: two chunks of one document are one source), best first, at most
   ``max_per_sentence`` (3); ties go to the better-ranked item.
5. Documents are numbered in the order they are first cited; the marker ``[n]`` is inserted before the
   sentence's final punctuation.
6. The bibliography lists every source document of the items, cited or not (:mod:`fabric.core.sources`):
   the cited ones first in marker order, then the others; each with its excerpt, the passage cited from it with
   the highest similarity, else its passage most similar to an answer sentence.
7. Disagreements between passages cited for the same sentence are detected by :mod:`fusion.disagree`.

Lexical similarity is the *containment* of the sentence's content words in the passage:
``|W(s) ∩ W(p)| / |W(s)|``, where ``W`` is :func:`fusion.text.content_words` (lower-cased words and numbers
minus a short stop-word list, plural ``s`` stripped). It answers "how much of what the
sentence says appears in the passage", which is what a citation claims; a sentence without content words
cites nothing.

**Work budget.** One alignment compares every answer sentence with every passage, so its cost is bounded before
any comparison: at most :data:`MAX_ANSWER_CHARS` characters of answer, :data:`MAX_SENTENCES` answer sentences,
:data:`MAX_PASSAGES` passages and :data:`MAX_PAIRS` sentence-passage pairs (a sentence and a passage are at most
:data:`~fusion.sentences.MAX_SENTENCE_CHARS` characters each); :func:`embedding_similarity` embeds at most
:data:`MAX_EMBEDDED` texts. Beyond any of them :class:`~fabric.core.errors.UnprocessableQueryError` is raised naming
``answer``, ``items`` or ``semantic`` (HTTP ``422``, an MCP error result, CLI exit 2) instead of holding a core
for seconds: within the budget one lexical alignment costs a fraction of a second.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fabric.core.errors import UnprocessableQueryError
from fabric.core.models import Embedder, Hit
from fabric.core.sources import Source, build_bibliography, document_id
from fusion.disagree import Disagreement, find_disagreements
from fusion.sentences import split_sentences
from fusion.text import content_words

__all__ = [
    "MAX_ANSWER_CHARS",
    "MAX_EMBEDDED",
    "MAX_PAIRS",
    "MAX_PASSAGES",
    "MAX_SENTENCES",
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

MAX_ANSWER_CHARS = 20_000
"""The longest answer one alignment takes, in characters."""
MAX_SENTENCES = 200
"""The most answer sentences one alignment takes."""
MAX_PASSAGES = 2_000
"""The most passages (sentences of the items' texts, all items together) one alignment takes."""
MAX_PAIRS = 100_000
"""The most sentence-passage pairs (answer sentences x passages) one alignment compares."""
MAX_EMBEDDED = 500
"""The most texts (answer sentences and passages together) :func:`embedding_similarity` embeds for one alignment."""

Similarity = Callable[[Sequence[str], Sequence[str]], Sequence[Sequence[float]]]
"""``similarity(sentences, passages)`` → matrix ``[len(sentences)][len(passages)]`` of scores in [0, 1]."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Citation:
    """One passage cited for one sentence."""

    marker: int
    """Bibliography number ``n`` of the cited document."""
    item_id: str
    """Id of the cited item (a chunk of the document ``bibliography[marker - 1]``)."""
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
    bibliography: tuple[Source, ...]
    """Every source document of the items, cited ones first: ``bibliography[n - 1]`` is marker ``n``
    (:func:`fabric.core.sources.build_bibliography`)."""
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
            "bibliography": [source.to_dict() for source in self.bibliography],
            "disagreements": [d.to_dict() for d in self.disagreements],
        }


def lexical_similarity(sentences: Sequence[str], passages: Sequence[str]) -> list[list[float]]:
    """Containment of each sentence's content words in each passage (see the module docstring)."""
    ps = [content_words(p) for p in passages]
    rows = []
    for s in sentences:
        ws = content_words(s)
        rows.append([len(ws & p) / len(ws) if ws else 0.0 for p in ps])
    return rows


def embedding_similarity(embedder: Embedder) -> Similarity:
    """A :data:`Similarity` from an embedder: cosine of unit vectors, clipped to [0, 1].

    The similarity raises :class:`~fabric.core.errors.UnprocessableQueryError` (``semantic``) for more than
    :data:`MAX_EMBEDDED` texts: embedding is the costly part of a semantic alignment.
    """

    def similarity(sentences: Sequence[str], passages: Sequence[str]) -> list[list[float]]:
        if len(sentences) + len(passages) > MAX_EMBEDDED:
            msg = (f"at most {MAX_EMBEDDED} sentences and passages together per semantic alignment, got "
                   f"{len(sentences) + len(passages)}: cite fewer items or use lexical similarity")  # fmt: skip
            raise UnprocessableQueryError("semantic", msg)
        vectors = embedder.embed([*sentences, *passages])
        sv, pv = vectors[: len(sentences)], vectors[len(sentences) :]
        return [[max(0.0, min(1.0, math.fsum(a * b for a, b in zip(s, p, strict=True)))) for p in pv] for s in sv]

    return similarity


def _with_markers(sentence: str, markers: Sequence[int]) -> str:
    if not markers:
        return sentence
    tags = "".join(f"[{n}]" for n in markers)
    closed = sentence.rstrip("\"'”’)")  # string methods, not a regex anchored at the end: linear in the sentence
    bare = closed.rstrip(".!?…")
    cut = len(bare) if len(bare) < len(closed) else len(sentence)
    return f"{sentence[:cut].rstrip()} {tags}{sentence[cut:]}"


def _within_budget(answer: str, items: Sequence[Hit]) -> tuple[list[str], list[int], list[str]]:
    """The answer's sentences, and the passages with the index of the item each belongs to.

    Raises:
        UnprocessableQueryError: the answer or the items exceed the work budget (see the module docstring).
    """
    if len(answer) > MAX_ANSWER_CHARS:
        raise UnprocessableQueryError("answer", f"at most {MAX_ANSWER_CHARS} characters, got {len(answer)}")
    sentences = split_sentences(answer)
    if len(sentences) > MAX_SENTENCES:
        msg = f"at most {MAX_SENTENCES} sentences per alignment, got {len(sentences)}: cite a shorter answer"
        raise UnprocessableQueryError("answer", msg)
    owners: list[int] = []
    passages: list[str] = []
    for k, item in enumerate(items):
        passages.extend(split_sentences(item.text))
        owners.extend([k] * (len(passages) - len(owners)))
        if len(passages) > MAX_PASSAGES:
            msg = f"the items hold more than {MAX_PASSAGES} sentences (passages) in all: cite fewer or shorter items"
            raise UnprocessableQueryError("items", msg)
    if len(sentences) * len(passages) > MAX_PAIRS:
        msg = (f"{len(sentences)} answer sentences x {len(passages)} passages is more than {MAX_PAIRS} comparisons "
               "per alignment: cite a shorter answer or fewer items")  # fmt: skip
        raise UnprocessableQueryError("items", msg)
    return sentences, owners, passages


def _excerpts(
    quoted: dict[str, tuple[float, str]],
    matrix: Sequence[Sequence[float]],
    docs: Sequence[str],
    passages: Sequence[str],
) -> dict[str, str]:
    """Document id → its excerpt: ``quoted`` (the passage cited from it with the highest similarity) for a cited
    document; for an uncited one, its passage most similar to any answer sentence, when one shares anything."""
    best: dict[str, tuple[float, str]] = {}
    for pi, passage in enumerate(passages):
        score = max((float(row[pi]) for row in matrix), default=0.0)
        if score > 0.0 and (docs[pi] not in best or score > best[docs[pi]][0]):
            best[docs[pi]] = (score, passage)
    best.update(quoted)
    return {doc: passage for doc, (_, passage) in best.items()}


def align_citations(
    answer: str,
    items: Sequence[Hit],
    *,
    similarity: Similarity | None = None,
    threshold: float = 0.7,
    max_per_sentence: int = 3,
) -> CitationResult:
    """Align ``answer`` with ``items`` (best first): citations, markers, bibliography and disagreements.

    Raises:
        ValueError: ``max_per_sentence`` below 1.
        UnprocessableQueryError: the answer or the items exceed the work budget (see the module docstring).
    """
    if max_per_sentence < 1:
        raise ValueError("max_per_sentence must be >= 1")
    sentences, owners, passages = _within_budget(answer, items)
    matrix = (similarity or lexical_similarity)(sentences, passages) if sentences and passages else []
    docs = [document_id(items[k]) for k in owners]  # the document of each passage
    numbers: dict[str, int] = {}  # document id → marker, in the order of first citation
    quoted: dict[str, tuple[float, str]] = {}  # document id → its best cited passage
    cited: list[CitedSentence] = []
    for si, sentence in enumerate(sentences):
        row = list(matrix[si]) if passages else []
        best: dict[str, tuple[float, int]] = {}  # one passage per document: its best, the earlier on a tie
        for pi, score in enumerate(row):
            if score >= threshold and (docs[pi] not in best or score > best[docs[pi]][0]):
                best[docs[pi]] = (float(score), pi)
        chosen = sorted(best.values(), key=lambda sp: (-sp[0], owners[sp[1]]))[:max_per_sentence]
        cites = []
        for score, pi in chosen:
            n = numbers.setdefault(docs[pi], len(numbers) + 1)
            cites.append(Citation(marker=n, item_id=items[owners[pi]].id, passage=passages[pi], similarity=score))
            if score > quoted.get(docs[pi], (-1.0, ""))[0]:
                quoted[docs[pi]] = (score, passages[pi])
        cited.append(CitedSentence(text=sentence, citations=tuple(cites), confidence=float(max(row, default=0.0))))
    text = " ".join(_with_markers(s.text, sorted(c.marker for c in s.citations)) for s in cited)
    bibliography = build_bibliography(items, numbers, _excerpts(quoted, matrix, docs, passages))
    disagreements = tuple(
        d
        for si, s in enumerate(cited)
        for d in find_disagreements(si, s.text, [(c.marker, c.passage) for c in s.citations])
    )
    return CitationResult(text=text, sentences=tuple(cited), bibliography=bibliography, disagreements=disagreements)
