"""Tests of ``fabric bench embedded`` on a tiny generated BEIR dataset (embeddings off)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabric.bench.embedded import ndcg_at_10
from fabric.cli import main


class TestNdcg:
    def test_perfect_ranking_scores_one(self) -> None:
        """The ideal order scores 1."""
        assert ndcg_at_10(["a", "b", "x"], {"a": 2, "b": 1}) == pytest.approx(1.0)

    def test_missing_relevant_scores_zero(self) -> None:
        """No relevant document in the top 10 scores 0."""
        assert ndcg_at_10(["x", "y"], {"a": 1}) == 0.0


def test_bench_reports_lane_and_engine_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bench ingests, scores the keyword lane and the engine, and reports latency percentiles."""
    monkeypatch.setenv("FABRIC__embeddings__backend", "none")
    monkeypatch.setenv("FABRIC_CACHE_DIR", str(tmp_path / "cache"))
    ds = tmp_path / "ds"
    (ds / "qrels").mkdir(parents=True)
    docs = [("d1", "Qdrant local mode locks its folder"), ("d2", "SQLite FTS5 ranks with BM25")]
    (ds / "corpus.jsonl").write_text("\n".join(json.dumps({"_id": i, "title": "", "text": t}) for i, t in docs))
    (ds / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "qdrant folder lock"}))
    (ds / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    assert main(["bench", "embedded", "--dataset", str(ds), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ndcg@10.keyword"] == pytest.approx(1.0)
    assert str(out["ndcg@10.vector"]).startswith("unavailable")
    assert out["search_p95_ms"] >= out["search_p50_ms"] > 0
