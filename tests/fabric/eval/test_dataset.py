"""BEIR loader: splits, graded qrels, scenario tags, manifests and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric.core.errors import FabricError
from fabric.eval.dataset import DatasetError, load_dataset

TINY = Path(__file__).resolve().parents[2] / "fixtures" / "beir_tiny"


def _write(
    root: Path, queries: str = '{"_id": "q1", "text": "x"}\n', qrels: str = "query-id\tcorpus-id\tscore\nq1\td1\t1\n"
):
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n')
    (root / "queries.jsonl").write_text(queries)
    (root / "qrels" / "test.tsv").write_text(qrels)
    return root


class TestLoad:
    def test_reads_judged_queries_in_qrels_order(self) -> None:
        """Only judged queries are kept, in qrels order."""
        ds = load_dataset(TINY, "test")
        assert ds.query_ids == ["q1", "q2", "q3", "q4", "q5", "q6"]

    def test_keeps_graded_and_zero_judgements(self) -> None:
        """Grades are kept as integers, zero included."""
        ds = load_dataset(TINY, "test")
        assert ds.qrels["q1"] == {"d1": 2, "d2": 1}
        assert ds.qrels["q5"]["d3"] == 0

    def test_reads_scenario_from_metadata_or_top_level(self) -> None:
        """Scenario tags come from metadata.scenario or a top-level scenario."""
        ds = load_dataset(TINY, "test")
        tags = {q.id: q.scenario for q in ds.queries}
        assert (tags["q4"], tags["q6"], tags["q3"]) == ("temporal", "relational", None)

    def test_reads_hint_from_metadata_or_top_level(self, tmp_path: Path) -> None:
        """A follow-up hint comes from metadata.hint or a top-level hint, stripped; none is None."""
        queries = (
            '{"_id": "q1", "text": "x", "metadata": {"hint": " qdrant "}}\n'
            '{"_id": "q2", "text": "y", "hint": "fts5"}\n{"_id": "q3", "text": "z"}\n'
        )
        qrels = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td1\t1\nq3\td1\t1\n"
        ds = load_dataset(_write(tmp_path, queries=queries, qrels=qrels))
        assert [q.hint for q in ds.queries] == ["qdrant", "fts5", None]

    def test_empty_hint_names_line(self, tmp_path: Path) -> None:
        """An empty or non-string hint is a clear error naming file and line."""
        with pytest.raises(DatasetError, match=r"queries.jsonl:1: 'hint' must be a non-empty string"):
            load_dataset(_write(tmp_path, queries='{"_id": "q1", "text": "x", "metadata": {"hint": 3}}\n'))

    def test_split_selects_qrels_file(self) -> None:
        """The split names qrels/<split>.tsv."""
        assert load_dataset(TINY, "train").query_ids == ["q7", "q3", "q5"]

    def test_limit_keeps_first_queries_and_their_qrels(self) -> None:
        """limited(n) keeps the first n queries and only their judgements."""
        ds = load_dataset(TINY, "test").limited(2)
        assert ds.query_ids == ["q1", "q2"]
        assert set(ds.qrels) == {"q1", "q2"}

    def test_corpus_hash_changes_with_content(self, tmp_path: Path) -> None:
        """Editing the corpus changes its hash."""
        ds = load_dataset(_write(tmp_path), "test")
        before = ds.corpus_hash()
        (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "text": "y"}\n')
        assert ds.corpus_hash() != before

    def test_manifest_points_at_markdown_corpus(self, tmp_path: Path) -> None:
        """dataset.toml names a corpus folder relative to the dataset and its format."""
        (tmp_path / "docs").mkdir()
        (tmp_path / "docs" / "a.md").write_text("# A\n")
        root = _write(tmp_path / "set")
        (root / "corpus.jsonl").unlink()
        (root / "dataset.toml").write_text('schema = 1\nname = "demo"\ncorpus = "../docs"\nformat = "markdown"\n')
        ds = load_dataset(root, "test")
        assert (ds.name, ds.corpus_format, ds.corpus) == ("demo", "markdown", (tmp_path / "docs").resolve())


class TestErrors:
    def test_missing_folder(self, tmp_path: Path) -> None:
        """A missing folder is a DatasetError naming it."""
        with pytest.raises(DatasetError, match="dataset folder not found"):
            load_dataset(tmp_path / "nope")

    def test_missing_split_lists_available(self, tmp_path: Path) -> None:
        """A missing split names the file and lists the splits that exist."""
        with pytest.raises(DatasetError, match="available splits: test"):
            load_dataset(_write(tmp_path), "train")

    def test_missing_corpus(self, tmp_path: Path) -> None:
        """A folder without a corpus says where it looked."""
        root = _write(tmp_path)
        (root / "corpus.jsonl").unlink()
        with pytest.raises(DatasetError, match="corpus not found"):
            load_dataset(root)

    def test_bad_json_line_names_line(self, tmp_path: Path) -> None:
        """Malformed queries.jsonl names file and line."""
        with pytest.raises(DatasetError, match=r"queries.jsonl:2: invalid JSON"):
            load_dataset(_write(tmp_path, queries='{"_id": "q1", "text": "x"}\n{oops\n'))

    def test_bad_score_names_line(self, tmp_path: Path) -> None:
        """A non-numeric grade past the header names file and line."""
        with pytest.raises(DatasetError, match=r"test.tsv:2: score 'high'"):
            load_dataset(_write(tmp_path, qrels="query-id\tcorpus-id\tscore\nq1\td1\thigh\n"))

    def test_unknown_judged_query(self, tmp_path: Path) -> None:
        """A judged query missing from queries.jsonl is reported."""
        with pytest.raises(DatasetError, match=r"not in queries\.jsonl"):
            load_dataset(_write(tmp_path, qrels="query-id\tcorpus-id\tscore\nq2\td1\t1\n"))

    def test_dataset_error_is_a_fabric_error(self) -> None:
        """The CLI maps DatasetError to exit 2 because it is a FabricError."""
        assert issubclass(DatasetError, FabricError)
