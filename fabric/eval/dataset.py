"""BEIR dataset loader: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv`` (graded relevance).

A dataset folder may instead point at a corpus stored elsewhere (the project's own query set points at the
Markdown demo corpus) with a small manifest, ``dataset.toml``::

    schema = 1
    name = "demo"
    corpus = "../../../fabric/demo/corpus"   # relative to the dataset folder
    format = "markdown"                      # beir | markdown | jsonl

Queries may carry a scenario class for the report's breakdown: ``{"_id": "q1", "text": "...",
"metadata": {"scenario": "temporal"}}`` (a top-level ``"scenario"`` works too), and a follow-up keyword hint
for the docs-memory policy's hint-rate, ``"metadata": {"hint": "fail-open"}`` (see :mod:`fabric.eval.hints`).

Every problem raises :class:`DatasetError` naming the file (and line) at fault.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fabric.core.errors import IngestError

__all__ = ["MANIFEST", "Dataset", "DatasetError", "EvalQuery", "load_dataset"]

MANIFEST = "dataset.toml"
"""Optional manifest file name inside a dataset folder."""

_FORMATS = ("beir", "markdown", "jsonl")


class DatasetError(IngestError):
    """An evaluation dataset folder is missing a file or holds malformed data."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalQuery:
    """One judged query."""

    id: str
    """Query id (``_id`` in ``queries.jsonl``)."""
    text: str
    """Query text."""
    scenario: str | None = None
    """Scenario class tagged by the dataset, if any (else the pre-flight intent is used)."""
    hint: str | None = None
    """Follow-up keyword hint a user would add when the first answer misses (the docs-memory policy's hint-rate)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Dataset:
    """A loaded evaluation dataset: judged queries of one split and where its corpus lives."""

    root: Path
    """The dataset folder."""
    name: str
    """Dataset name (manifest ``name`` or the folder name)."""
    split: str
    """Qrels split (``train``, ``test``, ...)."""
    corpus: Path
    """Corpus file (``corpus.jsonl``) or folder (Markdown)."""
    corpus_format: str
    """``beir``, ``markdown`` or ``jsonl``: how ingestion reads :attr:`corpus`."""
    queries: tuple[EvalQuery, ...]
    """Judged queries in qrels order (only those with at least one judgement)."""
    qrels: Mapping[str, Mapping[str, int]]
    """Query id → doc id → graded relevance."""

    @property
    def query_ids(self) -> list[str]:
        """Judged query ids in order."""
        return [q.id for q in self.queries]

    def limited(self, limit: int | None) -> Dataset:
        """The same dataset restricted to its first ``limit`` queries (None: all)."""
        if limit is None or limit >= len(self.queries):
            return self
        queries = self.queries[:limit]
        keep = {q.id for q in queries}
        return Dataset(
            root=self.root,
            name=self.name,
            split=self.split,
            corpus=self.corpus,
            corpus_format=self.corpus_format,
            queries=queries,
            qrels={q: r for q, r in self.qrels.items() if q in keep},
        )

    def corpus_hash(self) -> str:
        """SHA-256 of the corpus content (file bytes, or every file's relative path and bytes)."""
        digest = hashlib.sha256(self.corpus_format.encode())
        files = [self.corpus] if self.corpus.is_file() else sorted(p for p in self.corpus.rglob("*") if p.is_file())
        for path in files:
            digest.update(str(path.relative_to(self.corpus) if path != self.corpus else path.name).encode())
            with path.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
        return digest.hexdigest()


def _manifest(root: Path) -> dict[str, object]:
    path = root / MANIFEST
    if not path.exists():
        return {}
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise DatasetError(f"{path}: invalid TOML: {exc}") from None
    unknown = sorted(set(data) - {"schema", "name", "corpus", "format"})
    if unknown:
        raise DatasetError(f"{path}: unknown key(s) {', '.join(unknown)}; valid: schema, name, corpus, format")
    return data


def _read_queries(path: Path) -> dict[str, EvalQuery]:
    if not path.is_file():
        raise DatasetError(f"{path}: queries file not found (expected BEIR queries.jsonl)")
    out: dict[str, EvalQuery] = {}
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{lineno}: invalid JSON: {exc.msg}") from None
            if not isinstance(row, dict) or "_id" not in row or not isinstance(row.get("text"), str):
                raise DatasetError(f"{path}:{lineno}: a query needs '_id' and a string 'text'")
            meta = row.get("metadata")
            meta = meta if isinstance(meta, dict) else {}
            scenario = row.get("scenario") or meta.get("scenario")
            hint = row.get("hint") or meta.get("hint")
            if hint is not None and (not isinstance(hint, str) or not hint.strip()):
                raise DatasetError(f"{path}:{lineno}: 'hint' must be a non-empty string")
            qid = str(row["_id"])
            out[qid] = EvalQuery(
                id=qid,
                text=row["text"],
                scenario=str(scenario) if scenario else None,
                hint=hint.strip() if hint else None,
            )
    return out


def _read_qrels(path: Path) -> dict[str, dict[str, int]]:
    if not path.is_file():
        available = sorted(p.stem for p in path.parent.glob("*.tsv")) if path.parent.is_dir() else []
        hint = f"; available splits: {', '.join(available)}" if available else ""
        raise DatasetError(f"{path}: qrels file not found{hint}")
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            parts = line.rstrip("\n").split("\t")
            if not line.strip():
                continue
            if len(parts) == 4:  # TREC style: qid, iteration, doc, grade
                parts = [parts[0], parts[2], parts[3]]
            if len(parts) != 3:
                raise DatasetError(f"{path}:{lineno}: expected 3 tab-separated columns (query-id, corpus-id, score)")
            try:
                grade = int(float(parts[2]))
            except ValueError:
                if lineno == 1:  # the BEIR header
                    continue
                raise DatasetError(f"{path}:{lineno}: score {parts[2]!r} is not a number") from None
            qrels.setdefault(parts[0].strip(), {})[parts[1].strip()] = grade
    if not qrels:
        raise DatasetError(f"{path}: no judgements")
    return qrels


def load_dataset(root: Path, split: str = "test", *, corpus: Path | None = None) -> Dataset:
    """Load the judged queries of ``split`` and locate the corpus.

    Args:
        root: the dataset folder.
        split: qrels split name (``qrels/<split>.tsv``).
        corpus: corpus file or folder overriding the manifest and ``corpus.jsonl``.

    Raises:
        DatasetError: the folder, a file, or a line is missing or malformed.
    """
    if not root.is_dir():
        raise DatasetError(f"{root}: dataset folder not found")
    manifest = _manifest(root)
    fmt = str(manifest.get("format", "beir"))
    if fmt not in _FORMATS:
        raise DatasetError(f"{root / MANIFEST}: format {fmt!r} unknown; valid: {', '.join(_FORMATS)}")
    if corpus is not None:
        corpus_path = corpus
        if corpus.is_dir():
            fmt = "markdown"
        elif "corpus" not in manifest and fmt == "markdown":
            fmt = "beir"
    elif "corpus" in manifest:
        corpus_path = (root / str(manifest["corpus"])).resolve()
    else:
        corpus_path = root / "corpus.jsonl"
    if not corpus_path.exists():
        raise DatasetError(f"{corpus_path}: corpus not found (BEIR corpus.jsonl, a manifest 'corpus', or --corpus)")
    queries = _read_queries(root / "queries.jsonl")
    qrels_path = root / "qrels" / f"{split}.tsv"
    qrels = _read_qrels(qrels_path)
    missing = [q for q in qrels if q not in queries]
    if missing:
        raise DatasetError(f"{qrels_path}: {len(missing)} judged query id(s) not in queries.jsonl, e.g. {missing[0]!r}")
    judged = tuple(queries[q] for q in qrels)
    return Dataset(
        root=root,
        name=str(manifest.get("name") or root.resolve().name),
        split=split,
        corpus=corpus_path,
        corpus_format=fmt,
        queries=judged,
        qrels=qrels,
    )
