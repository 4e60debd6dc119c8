"""Citation accuracy: ``fabric cite`` measured on a set of answer sentences with known supporting passages.

A *judged set* is a JSONL file, one sentence per line: ``{"id", "query", "sentence", "supports": [ids]}``. The
``supports`` ids name the passages that support the sentence: a document id (``corpus:design/fusion.md``, any chunk
of it supports) or an item id (``corpus:design/fusion.md#fusion-and-ranking-0``, that chunk only); an empty list
marks a sentence the corpus does not support (a made-up or contradicted claim), which should stay uncited. The
shipped set (:data:`SHIPPED_SET`, ``fabric/demo/queries/citations.jsonl``) holds 33 sentences written for the demo
corpus: 25 paraphrase a passage, 8 state what no passage says.

Each sentence goes through what ``fabric cite --query QUERY --answer SENTENCE`` does: the engine searches ``query``
(``top_k`` items, the configured route), then :func:`fusion.citations.align_citations` aligns the sentence with the
items. The figures, over the sentences of the set:

- ``accuracy``: among the sentences with a supporting passage, the share whose best citation (the first, the most
  similar passage) is a supporting passage; a sentence left uncited, or cited to another passage, counts as wrong.
  This is *citation accuracy* (seed 003 asks for more than 0.90; the service alerts below 0.80 of coverage).
- ``uncited.precision`` / ``uncited.recall``: of the sentences left uncited, the share the corpus does not support;
  of the unsupported sentences, the share left uncited (None when there are none).
- ``coverage``: the share of all sentences with at least one citation. It is what the service's
  ``fabric_citation_sentences_total{supported}`` counts in production (no judgements there): a coverage, not an
  accuracy (a wrong citation raises it).
- ``retrieval_recall``: among the supported sentences, the share whose supporting passage was among the items
  searched; an alignment cannot do better than retrieval.

No I/O but :func:`load_judged`; :func:`run_cite_eval` ingests the corpus into ``settings.home`` and runs the engine.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from fabric.core.errors import ConfigError
from fabric.core.models import Hit
from fabric.core.sources import document_id
from fabric.settings import Settings

__all__ = [
    "SHIPPED_SET",
    "CiteOutcome",
    "JudgedSentence",
    "load_judged",
    "outcome",
    "run_cite_eval",
    "score_outcomes",
    "shipped_set",
]

SHIPPED_SET = "citations.jsonl"
"""The judged set shipped with the demo query set (``fabric/demo/queries/``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgedSentence:
    """One sentence of a judged set."""

    id: str
    query: str
    """What the engine searches for the passages."""
    sentence: str
    """The answer sentence to cite."""
    supports: frozenset[str]
    """Ids (document or item) of the passages that support it; empty: nothing in the corpus does."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CiteOutcome:
    """What ``fabric cite`` did with one judged sentence."""

    judged: JudgedSentence
    cited: tuple[tuple[str, str], ...]
    """``(item id, document id)`` of each citation, best first."""
    retrieved: frozenset[str]
    """Item and document ids of the items searched."""

    @property
    def correct(self) -> bool | None:
        """Whether the best citation is a supporting passage; None for an unsupported sentence."""
        if not self.judged.supports:
            return None
        return bool(self.cited) and not self.judged.supports.isdisjoint(self.cited[0])

    def to_dict(self) -> dict[str, Any]:
        """One row of the report."""
        return {
            "id": self.judged.id,
            "supported": bool(self.judged.supports),
            "cited": [item for item, _ in self.cited],
            "correct": self.correct,
            "retrieved": not self.judged.supports.isdisjoint(self.retrieved) if self.judged.supports else None,
        }


def shipped_set() -> Path:
    """Where the shipped judged set is installed."""
    return Path(str(resources.files("fabric.demo").joinpath("queries", SHIPPED_SET)))


def load_judged(path: Path) -> list[JudgedSentence]:
    """Read a judged set (see the module docstring).

    Raises:
        ConfigError: the file is not a judged set (naming the line and the field).
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read the judged set: {exc.strerror}", source=str(path)) from None
    out: list[JudgedSentence] = []
    seen: set[str] = set()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"not JSON: {exc.msg}", source=where) from None
        if not isinstance(row, dict):
            raise ConfigError("expected an object", source=where)
        for key in ("id", "query", "sentence"):
            if not isinstance(row.get(key), str) or not row[key].strip():
                raise ConfigError(f"{key}: expected a non-empty string", source=where, key=key)
        supports = row.get("supports")
        if not isinstance(supports, list) or not all(isinstance(s, str) and s for s in supports):
            raise ConfigError("supports: expected a list of passage ids (empty: unsupported)", source=where)
        if row["id"] in seen:
            raise ConfigError(f"id: {row['id']!r} appears twice", source=where, key="id")
        seen.add(row["id"])
        out.append(JudgedSentence(id=row["id"], query=row["query"], sentence=row["sentence"],
                                  supports=frozenset(supports)))  # fmt: skip
    if not out:
        raise ConfigError("the judged set holds no sentence", source=str(path))
    return out


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def score_outcomes(outcomes: Sequence[CiteOutcome]) -> dict[str, Any]:
    """The figures of the module docstring over ``outcomes``."""
    supported = [o for o in outcomes if o.judged.supports]
    unsupported = [o for o in outcomes if not o.judged.supports]
    uncited = [o for o in outcomes if not o.cited]
    return {
        "sentences": len(outcomes),
        "supported": len(supported),
        "unsupported": len(unsupported),
        "accuracy": _share(sum(1 for o in supported if o.correct), len(supported)),
        "uncited": {
            "precision": _share(sum(1 for o in uncited if not o.judged.supports), len(uncited)),
            "recall": _share(sum(1 for o in unsupported if not o.cited), len(unsupported)),
        },
        "coverage": _share(len(outcomes) - len(uncited), len(outcomes)),
        "retrieval_recall": _share(sum(1 for o in supported if o.to_dict()["retrieved"]), len(supported)),
    }


def outcome(judged: JudgedSentence, hits: Sequence[Hit], result: Any) -> CiteOutcome:
    """The outcome of one alignment (``result``: a :class:`fusion.citations.CitationResult`)."""
    docs = {h.id: document_id(h) for h in hits}
    cites = [c for s in result.sentences for c in s.citations]
    return CiteOutcome(
        judged=judged,
        cited=tuple((c.item_id, docs.get(c.item_id, c.item_id)) for c in cites),
        retrieved=frozenset(docs) | frozenset(docs.values()),
    )


async def run_cite_eval(
    settings: Settings,
    judged: Sequence[JudgedSentence],
    corpus: Path,
    *,
    top_k: int = 10,
    threshold: float = 0.7,
    max_per_sentence: int = 3,
    semantic: bool = False,
) -> dict[str, Any]:
    """Ingest ``corpus`` (Markdown) into ``settings.home``, cite every judged sentence, score (the report)."""
    from fabric.ingest.run import run_ingest
    from fabric.query.engine import Engine
    from fabric.query.validation import parse_request
    from fusion.citations import align_citations, embedding_similarity

    report = await run_ingest(settings, corpus, "markdown")
    outcomes = []
    async with Engine(settings) as engine:
        embedder = engine.resources.embedder if semantic and engine.resources is not None else None
        similarity = embedding_similarity(embedder) if embedder is not None else None
        for j in judged:
            result = await engine.search(parse_request({"query": j.query, "top_k": top_k}, settings))
            hits = [it.hit for it in result.items]
            aligned = align_citations(
                j.sentence, hits, similarity=similarity, threshold=threshold, max_per_sentence=max_per_sentence
            )
            outcomes.append(outcome(j, hits, aligned))
    return {
        "metrics": score_outcomes(outcomes),
        "config": {
            "top_k": top_k,
            "threshold": threshold,
            "max_per_sentence": max_per_sentence,
            "similarity": "semantic" if similarity is not None else "lexical",
            "embeddings": report.to_dict().get("embeddings"),
        },
        "rows": [o.to_dict() for o in outcomes],
    }
