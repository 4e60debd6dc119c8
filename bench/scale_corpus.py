"""The 50K-passage scale corpus, made at run time from SciFact (``/work/shared/datasets/scifact``), never committed.

Every abstract is split into sentences; each sentence starts one passage of two sentences (stride 1, so the last
sentence of an abstract stands alone), and the abstract's title is one more passage. The passage keeps the
abstract's title (what is embedded is ``title + text``, as for BEIR documents). SciFact's 5,183 abstracts
(45,132 sentences) give 50,315 passages. Queries are SciFact's; qrels are mapped to passages: every passage of a
relevant abstract is relevant with the abstract's grade.

:func:`build_scale_dataset` writes a BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``)
that ``fabric ingest`` and ``fabric eval`` read as they read SciFact itself.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Passage", "ScaleCorpus", "build_scale_dataset", "passages_of", "split_sentences"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")


@dataclass(frozen=True, slots=True)
class Passage:
    """One passage of an abstract."""

    id: str
    doc_id: str
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class ScaleCorpus:
    """Where :func:`build_scale_dataset` wrote the dataset and how big it is."""

    root: Path
    passages: int
    abstracts: int
    queries: int
    split: str


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: a split after ``.``, ``!`` or ``?`` followed by space and a capital, digit or bracket."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def passages_of(doc_id: str, title: str, text: str, *, window: int = 2) -> list[Passage]:
    """The title passage and one ``window``-sentence passage per sentence (stride 1) of one abstract."""
    sentences = split_sentences(text)
    out = [Passage(f"{doc_id}-t", doc_id, title, title)] if title.strip() else []
    for i in range(len(sentences)):
        out.append(Passage(f"{doc_id}-{i}", doc_id, title, " ".join(sentences[i : i + window])))
    return out


def _rows(path: Path) -> Iterator[dict[str, object]]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def build_scale_dataset(
    source: Path, target: Path, *, split: str = "train", window: int = 2, abstracts: int = 0
) -> ScaleCorpus:
    """Write the passage dataset of the BEIR folder ``source`` into ``target`` (created; files replaced).

    ``abstracts`` > 0 keeps only the first ones (a smaller corpus for quick runs).

    Raises:
        FileNotFoundError: ``source`` lacks ``corpus.jsonl``, ``queries.jsonl`` or ``qrels/<split>.tsv``.
    """
    qrels_in = source / "qrels" / f"{split}.tsv"
    for need in (source / "corpus.jsonl", source / "queries.jsonl", qrels_in):
        if not need.is_file():
            raise FileNotFoundError(f"{need} is missing (a BEIR folder with the {split} split is needed)")
    target.mkdir(parents=True, exist_ok=True)
    by_doc: dict[str, list[str]] = defaultdict(list)
    n_passages = n_docs = 0
    with (target / "corpus.jsonl").open("w", encoding="utf-8") as out:
        for row in _rows(source / "corpus.jsonl"):
            if abstracts and n_docs >= abstracts:
                break
            doc_id, n_docs = str(row["_id"]), n_docs + 1
            for p in passages_of(doc_id, str(row.get("title") or ""), str(row.get("text") or ""), window=window):
                out.write(json.dumps({"_id": p.id, "title": p.title, "text": p.text}) + "\n")
                by_doc[doc_id].append(p.id)
                n_passages += 1
    (target / "qrels").mkdir(exist_ok=True)
    with qrels_in.open(encoding="utf-8") as fh, (target / "qrels" / f"{split}.tsv").open("w") as out:
        out.write("query-id\tcorpus-id\tscore\n")
        for line in fh:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3 or parts[0] == "query-id":
                continue
            for pid in by_doc.get(parts[1], ()):
                out.write(f"{parts[0]}\t{pid}\t{parts[2]}\n")
    queries = (source / "queries.jsonl").read_text(encoding="utf-8")
    (target / "queries.jsonl").write_text(queries, encoding="utf-8")
    n_queries = sum(1 for line in queries.splitlines() if line.strip())
    return ScaleCorpus(root=target, passages=n_passages, abstracts=n_docs, queries=n_queries, split=split)
