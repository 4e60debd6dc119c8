"""``fabric eval`` end to end on the tiny BEIR fixture, with the engine and ingestion swapped for fakes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from fabric.cli import main
from tests.fabric.cli.conftest import TINY


def _eval(*extra: str) -> int:
    return main(["eval", str(TINY), "--lanes", "keyword", "vector", *extra])


class TestEvalCommand:
    def test_writes_artifact_and_markdown(self, fake, tmp_path: Path) -> None:
        """A run writes evals/artifacts/retrieval.json and retrieval.md beside it."""
        assert _eval() == 0
        art = json.loads((tmp_path / "evals/artifacts/retrieval.json").read_text())
        assert set(art["metrics"]["lanes"]) == {"keyword", "vector"}
        assert (tmp_path / "evals/artifacts/retrieval.md").read_text().startswith("# Retrieval eval")

    def test_json_prints_the_artifact(self, fake, capsys) -> None:
        """--json prints the artifact to stdout."""
        assert _eval("--json") == 0
        art = json.loads(capsys.readouterr().out)
        assert art["metrics"]["fused"]["hit_at_5"] > 0
        assert art["config"]["lanes"] == ["keyword", "vector"]

    def test_second_run_reuses_the_scratch_home(self, fake) -> None:
        """Ingestion happens once per corpus content."""
        _eval()
        _eval()
        assert len(fake["ingested"]) == 1

    def test_eval_settings_ask_lanes_for_top_k(self, fake) -> None:
        """The engine is opened with lanes asked for as many hits as the eval scores."""
        _eval("--top-k", "100")
        assert fake["engines"][0].engine.lane_top_k >= 100

    def test_limit_and_split(self, fake, capsys) -> None:
        """--split and --limit select the judged queries."""
        _eval("--split", "train", "--limit", "2", "--json")
        art = json.loads(capsys.readouterr().out)
        assert (art["split"], art["dataset"]["queries"]) == ("train", 2)

    def test_gate_passes_against_own_baseline(self, fake, tmp_path: Path) -> None:
        """A run gated against the baseline it just wrote passes quality checks (exit 0 unless latency noise)."""
        base = tmp_path / "evals/baselines/retrieval.json"
        assert _eval("--write-baseline", str(base)) == 0
        data = json.loads(base.read_text())
        data["metrics"]["fused"]["latency_p95_ms"] *= 100  # make latency irrelevant for this test
        for attempt in data["latency"]["attempts"]:
            attempt["p95_normalised"] *= 100
        base.write_text(json.dumps(data))
        assert _eval("--gate", str(base)) == 0
        art = json.loads((tmp_path / "evals/artifacts/retrieval.json").read_text())
        assert art["gate"]["passed"] is True
        assert art["baseline_revision"] == data["git_revision"]

    def test_baseline_is_best_of_n_timed_passes(self, fake, tmp_path: Path) -> None:
        """--write-baseline times the fused pass --latency-passes times and keeps the best normalised p95."""
        base = tmp_path / "base.json"
        assert _eval("--write-baseline", str(base), "--latency-passes", "3") == 0
        latency = json.loads(base.read_text())["latency"]
        assert len(latency["attempts"]) == 3
        assert latency["p95_normalised"] == min(a["p95_normalised"] for a in latency["attempts"])

    def test_gate_times_again_only_while_latency_fails(self, fake, tmp_path: Path, monkeypatch) -> None:
        """A passing first attempt is enough; an impossible latency baseline uses every attempt, then fails."""
        monkeypatch.setattr("fabric.eval.gate.MIN_LATENCY_QUERIES", 0)  # the tiny set's latency is gated here
        base = tmp_path / "base.json"
        _eval("--write-baseline", str(base), "--latency-passes", "1")
        data = json.loads(base.read_text())
        data["latency"]["attempts"][0]["p95_normalised"] *= 100
        base.write_text(json.dumps(data))
        assert _eval("--gate", str(base), "--latency-passes", "3") == 0
        art = json.loads((tmp_path / "evals/artifacts/retrieval.json").read_text())
        assert len(art["latency"]["attempts"]) == 1

        data["latency"]["attempts"][0]["p95_normalised"] /= 1e6
        base.write_text(json.dumps(data))
        assert _eval("--gate", str(base), "--latency-passes", "3") == 1
        art = json.loads((tmp_path / "evals/artifacts/retrieval.json").read_text())
        assert len(art["latency"]["attempts"]) == 3
        assert art["gate"]["checks"]["latency_p95_ms"]["compared"] == "normalised, best of 3"
        assert art["gate"]["checks"]["ndcg_at_10"]["passed"] is True

    def test_latency_passes_must_be_positive(self, fake, capsys) -> None:
        """--latency-passes 0 is a usage error naming the problem."""
        with pytest.raises(SystemExit) as exc:
            _eval("--latency-passes", "0")
        assert exc.value.code == 2
        assert "must be at least 1" in capsys.readouterr().err

    def test_gate_fails_on_worse_config(self, fake, tmp_path: Path) -> None:
        """Keyword alone gated against the fused keyword+vector baseline exits 1 on nDCG@10."""
        base = tmp_path / "base.json"
        _eval("--write-baseline", str(base))
        assert main(["eval", str(TINY), "--lanes", "keyword", "--gate", str(base)]) == 1
        art = json.loads((tmp_path / "evals/artifacts/retrieval.json").read_text())
        assert art["gate"]["checks"]["ndcg_at_10"]["passed"] is False

    def test_bad_dataset_dir_exits_2(self, fake, capsys) -> None:
        """A folder that is not a dataset gives a clear error and exit 2."""
        assert main(["eval", "/nonexistent/dataset"]) == 2
        assert "dataset folder not found" in capsys.readouterr().err

    def test_unknown_lane_exits_2(self, fake, capsys) -> None:
        """An unknown lane name is a clear error naming the valid ones."""
        assert main(["eval", str(TINY), "--lanes", "sonar"]) == 2
        assert "unknown lane 'sonar'" in capsys.readouterr().err

    def test_missing_baseline_exits_2(self, fake, capsys) -> None:
        """--gate with a missing baseline file says how to create one."""
        assert _eval("--gate", "missing.json") == 2
        assert "--write-baseline" in capsys.readouterr().err


class TestEvalRealEngine:
    def test_keyword_lane_end_to_end(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys) -> None:
        """The real ingest + engine + SQLite FTS5 lane find the judged docs of the tiny fixture."""
        monkeypatch.setenv("FABRIC_CACHE_DIR", str(tmp_path / "cache"))
        monkeypatch.setenv("FABRIC__embeddings__backend", '"none"')  # lexical only: no model load in unit tests
        monkeypatch.chdir(tmp_path)
        assert main(["eval", str(TINY), "--lanes", "keyword", "--json"]) == 0
        art = json.loads(capsys.readouterr().out)
        assert art["lane_status"] == {"keyword": {"success": 6}}
        # 5 of 6: "how to roll back a release" shares only function words ("a", "to") with its target ("Rollback
        # procedure"), and the lane leaves those out of the query (lanes/keyword/sqlite_fts/stopwords.py).
        assert art["metrics"]["fused"]["hit_at_5"] == round(5 / 6, 6)
        assert len(list((tmp_path / "cache" / "eval-homes").glob("*/ready.json"))) == 1
        assert art["config"]["route"] == "auto"  # the shipped default route: what a request naming none gets

    def test_route_flag_and_the_federation_beside_it(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys):
        """``--route all`` measures the federation itself (no second pass); the default route reports it beside."""
        monkeypatch.setenv("FABRIC_CACHE_DIR", str(tmp_path / "cache"))
        monkeypatch.setenv("FABRIC__embeddings__backend", '"none"')
        monkeypatch.chdir(tmp_path)
        assert main(["eval", str(TINY), "--lanes", "keyword", "graph", "--route", "all", "--json"]) == 0
        art = json.loads(capsys.readouterr().out)
        assert art["config"]["route"] == "all"
        assert "federation" not in art["metrics"]
        assert main(["eval", str(TINY), "--lanes", "keyword", "graph", "--json"]) == 0
        art = json.loads(capsys.readouterr().out)
        assert art["config"]["route"] == "auto"
        assert set(art["metrics"]["lanes"]) == {"keyword", "graph"}
        assert art["comparison"]["federation"]["against"] == "federation (route all)"
        first = tmp_path / "evals" / "artifacts" / "retrieval.json"
        assert main(["eval", str(TINY), "--lanes", "keyword", "--route", "all", "--compare-with", str(first)]) == 0
        compared = json.loads(first.read_text())["comparison"]["other"]  # the run before, now overwritten
        assert compared["against"] == "retrieval.json (route auto)"
        assert compared["ndcg_at_10"]["wins"] + compared["ndcg_at_10"]["losses"] + compared["ndcg_at_10"]["ties"] == 6
        with pytest.raises((SystemExit, argparse.ArgumentError)):  # the process exits 2 with argparse's message
            main(["eval", str(TINY), "--route", "sideways"])
