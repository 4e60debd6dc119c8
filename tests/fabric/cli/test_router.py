"""Tests for ``fabric router label|train|eval``: the real ingest, engine and MiniLM on the routing query set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabric.cli import main

ROUTING = Path(__file__).resolve().parents[3] / "evals" / "queries" / "routing"


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("FABRIC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FABRIC_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


@pytest.mark.slow
def test_label_train_eval_on_the_routing_set(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Labels for every query, a trained artifact under the home, then a report with every router."""
    assert main(["router", "label", str(ROUTING), "--limit", "12", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["labelled"] == 12
    assert set(summary["ablation"]) == {"0.00", "0.02", "0.05", "0.10"}
    assert sum(summary["labels"].values()) == 12
    assert (home / "router" / "labels" / "routing.jsonl").is_file()

    assert main(["router", "train", "--epochs", "5", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["train_size"] + report["dev_size"] == 12
    assert (home / "router" / "classifier.pt").is_file()
    thresholds = report["heuristic_thresholds"]
    assert thresholds["fit_queries"] + thresholds["dev_queries"] == 12
    assert {"configured", "chosen"} <= set(thresholds["held_out"]["all"])
    assert {"skew_max", "max_score_min", "ndcg_at_10"} <= set(thresholds["best_on_fit"][0])

    labels = home / "router" / "labels" / "routing.jsonl"
    labels.unlink()
    assert main(["router", "eval", str(ROUTING), "--limit", "12", "--json", "--write-labels"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["labels_file"] == str(labels)
    assert len(labels.read_text(encoding="utf-8").splitlines()) == 12
    rows = out["routers"]
    assert list(rows) == ["all", "dense", "heuristic", "classifier", "oracle"]
    for row in rows.values():
        assert {"ndcg_ratio_vs_all", "lanes_ratio_vs_all", "p95_ratio_vs_all", "ndcg_at_10", "p50_ms"} <= set(row)
    assert rows["dense"]["lanes_per_query"] == 2.0  # keyword + vector
    assert rows["all"]["lanes_per_query"] == 3.0
    assert rows["heuristic"]["strategies"]["temporal"] >= 8  # the first 12 queries are temporal (t1-t10, h1-h2)


def test_train_without_labels_exits_2(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No label files: a clear message, no traceback."""
    assert main(["router", "train"]) == 2
    assert "fabric router label" in capsys.readouterr().err


def test_dev_only_with_write_labels_exits_2(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Writing labels from the dev split alone would lose the training labels: refused."""
    assert main(["router", "eval", str(ROUTING), "--dev-only", "--write-labels"]) == 2
    assert "--dev-only" in capsys.readouterr().err


def test_eval_bad_dataset_exits_2(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing dataset folder is named."""
    assert main(["router", "eval", str(home / "nope")]) == 2
    assert "dataset folder not found" in capsys.readouterr().err
