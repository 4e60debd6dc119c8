"""Tests of ``fabric bench scale`` on a tiny generated SciFact-like folder (embeddings off, real stores)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import bench.scale as mod
from fabric.cli import main


def _scifact_like(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, docs: list[dict[str, str]], query: str) -> Path:
    """A BEIR folder of ``docs`` and one query judging d1 relevant; embeddings off, a cache of the test's own."""
    monkeypatch.setenv("FABRIC__embeddings__backend", "none")
    monkeypatch.setenv("FABRIC_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "src"
    (src / "qrels").mkdir(parents=True)
    (src / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (src / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": query}) + "\n")
    (src / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    return src


def test_bench_ingests_passages_and_times_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bench builds the passages, ingests them (stage times), runs judged queries and reports percentiles."""
    docs = [
        {"_id": "d1", "title": "Folder locks", "text": "Qdrant local mode locks its folder. A second process fails."},
        {"_id": "d2", "title": "Ranking", "text": "SQLite FTS5 ranks with BM25. It is fast."},
    ]
    src = _scifact_like(tmp_path, monkeypatch, docs, "qdrant folder lock")
    keep = tmp_path / "work"
    load = ["--rates", "4,8", "--seconds", "1", "--warmup-s", "0.5"]
    assert main(["bench", "scale", "--dataset", str(src), "--keep", str(keep), "--json", *load]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["entries"], out["abstracts"], out["queries"]) == (6, 2, 1)
    assert set(out["ingest_seconds"]) >= {"load", "chunk", "embed", "write"}
    assert out["write_s"] == out["ingest_seconds"]["write"]
    assert out["c1_p95_ms"] >= out["c1_p50_ms"] > 0
    assert out["route"] == "auto"  # the configured default route, as fabric serve answers a request without one
    assert out["ndcg_at_10_passages"] > 0
    assert out["empty_answers"] == 0
    assert "encode_p50_ms" not in out  # no model without embeddings
    assert (keep / "dataset" / "corpus.jsonl").is_file()
    assert [r["rps_target"] for r in out["load"]] == [4.0, 8.0]
    for rate in out["load"]:  # a real fabric serve child answered every request of the open-loop load
        assert (rate["requests"], rate["ok"], rate["errors"], rate["rejected"]) == (
            round(rate["rps_target"]),
            round(rate["rps_target"]),
            0,
            0,
        )
        assert rate["empty_answers"] == 0
        assert rate["p99_ms"] >= rate["p95_ms"] >= rate["p50_ms"] > 0
        assert set(rate["not_closed_after"]) <= {"vector"}  # embeddings off: only the vector lane fails
        assert {"cpu_ms_per_query", "rss_mb", "rps_achieved"} <= set(rate)


def test_route_option_times_the_route_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--route all`` times the whole federation (the documents as they are, no load)."""
    src = _scifact_like(
        tmp_path, monkeypatch, [{"_id": "d1", "title": "Locks", "text": "Folder locks."}], "folder locks"
    )
    args = ["bench", "scale", "--dataset", str(src), "--plain", "--no-load", "--json", "--route", "all"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["route"] == "all"
    assert set(out["c1_lane_p50_ms"]) == {"keyword", "vector", "graph"}  # every lane planned (vector fails: no model)


def test_replicas_share_the_load_over_one_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], state_url: str
) -> None:
    """``--replicas 2 --state-url``: two real fabric serve children on one PostgreSQL database, the requests
    alternating between them; each answers its half."""
    src = _scifact_like(
        tmp_path, monkeypatch, [{"_id": "d1", "title": "Locks", "text": "Folder locks."}], "folder locks"
    )
    load = ["--rates", "6", "--seconds", "1", "--warmup-s", "0", "--replicas", "2", "--state-url", state_url]
    assert main(["bench", "scale", "--dataset", str(src), "--plain", "--json", "--queries", "1", *load]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["replicas"] == 2
    [rate] = out["load"]
    assert (rate["requests"], rate["ok"], rate["errors"], rate["rejected"]) == (6, 6, 0, 0)
    assert rate["ok_by_replica"] == [3, 3]


def test_more_replicas_need_a_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--replicas 2`` without ``--state-url`` is refused before any work, naming the option."""
    src = _scifact_like(tmp_path, monkeypatch, [{"_id": "d1", "title": "Locks", "text": "Locks."}], "locks")
    assert main(["bench", "scale", "--dataset", str(src), "--plain", "--replicas", "2"]) == 2
    assert "--state-url" in capsys.readouterr().err


def test_public_api() -> None:
    """The bench module's entry points."""
    assert mod.__all__ == ["add_arguments", "run"]
