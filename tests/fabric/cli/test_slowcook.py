"""``fabric slowcook`` through ``fabric.cli.main``: real incremental ingest of the demo corpus into a tmp home, the
real engine (SQLite FTS5 and graph lanes; embeddings off, no model in unit tests) over the project's query set."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from fabric.cli import main

ROOT = Path(__file__).resolve().parents[3]
DEMO_QUERIES = ROOT / "fabric" / "demo" / "queries"
DEMO_CORPUS = ROOT / "fabric" / "demo" / "corpus"


@pytest.fixture
def query_set(tmp_path: Path, lexical_only: None) -> Path:
    """The project's query set over a copy of the demo corpus (a folder named ``corpus``, so doc ids match)."""
    corpus = tmp_path / "src" / "corpus"
    shutil.copytree(DEMO_CORPUS, corpus)
    folder = tmp_path / "queries"
    folder.mkdir()
    shutil.copy(DEMO_QUERIES / "queries.jsonl", folder)
    shutil.copytree(DEMO_QUERIES / "qrels", folder / "qrels")
    (folder / "dataset.toml").write_text(f'schema = 1\nname = "demo"\ncorpus = "{corpus}"\nformat = "markdown"\n')
    return folder


def _cook(home: Path, queries: Path, *extra: str) -> int:
    return main(["--home", str(home), "slowcook", "--queries", str(queries), *extra])


def _receipt(home: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((home / "slowcook" / "receipt.json").read_text())
    return data


class TestSlowCook:
    def test_baseline_then_unchanged_then_a_lost_target(
        self, tmp_path: Path, query_set: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """First run: the baseline receipt. Unchanged corpus: nothing rewritten, exit 0. The document a query
        targets removed: exit 1 with one line naming the query and its target."""
        home = tmp_path / "home"
        assert _cook(home, query_set) == 0
        first = _receipt(home)
        out = capsys.readouterr()
        assert "BASELINE" in out.out
        assert out.err == ""
        chunks = first["corpus"]["chunks"]
        assert first["corpus"]["added"] == chunks > 0
        assert (first["verdict"]["status"], first["verdict"]["exit_code"]) == ("baseline", 0)
        assert first["query_set"]["queries"] == 34
        assert first["per_query"]["r2"] == {"rank": 1, "hit_at_5": True}  # "how are U.S. and United States merged"
        assert len(first["failures"]) == min(5, first["failure_count"])
        assert all(c["first"]["title"] and c["first"]["score"] > 0 for c in first["failures"])  # what came instead

        assert _cook(home, query_set) == 0
        second = _receipt(home)
        assert capsys.readouterr().err == ""
        assert (second["corpus"]["unchanged"], second["corpus"]["added"], second["corpus"]["deleted"]) == (chunks, 0, 0)
        assert second["verdict"]["status"] == "pass"
        assert second["metrics"] == first["metrics"]
        assert json.loads((home / "slowcook" / "receipt.previous.json").read_text())["time"] == first["time"]

        corpus = tmp_path / "src" / "corpus"
        (corpus / "design" / "graph-lane.md").unlink()  # r2's only relevant document
        budgets = corpus / "design" / "budgets.md"
        budgets.write_text(budgets.read_text() + "\nReviewed again this week.\n")
        assert _cook(home, query_set) == 1
        third = _receipt(home)
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1
        assert err[0].startswith("fabric slowcook: REGRESSION: 1 newly missed query: r2 (")
        assert "expected corpus:design/graph-lane.md" in err[0]
        assert third["corpus"]["deleted"] >= 1
        assert third["corpus"]["updated"] >= 1
        assert [c["query_id"] for c in third["newly_missed"]] == ["r2"]
        assert third["newly_missed"][0]["expected_rank"] is None
        assert third["failures"][0]["query_id"] == "r2"
        assert third["verdict"]["exit_code"] == 1

        assert _cook(home, query_set) == 0  # reported once: the next run compares with the one that saw it
        assert _receipt(home)["verdict"]["status"] == "pass"

    def test_json_receipt_at_a_given_path(
        self, tmp_path: Path, query_set: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--receipt keeps the receipt (and reads the previous one) there; --json prints it; --top bounds failures."""
        path = tmp_path / "receipts" / "nightly.json"
        assert _cook(tmp_path / "home", query_set, "--receipt", str(path), "--top", "2", "--json") == 0
        printed = json.loads(capsys.readouterr().out)
        assert printed == json.loads(path.read_text())
        assert printed["receipt_path"] == str(path)
        assert len(printed["failures"]) == 2
        assert set(printed["failures"][0]) == {"query_id", "query", "expected", "expected_rank", "first", "ndcg_at_10"}
        assert printed["hints"]["queries"] == 34
        assert not (tmp_path / "home" / "slowcook").exists()


class TestBadInput:
    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (["--queries", "missing-folder"], "missing-folder"),
            (["--top", "0"], "--top must be at least 1"),
            (["--lanes", "nope"], "unknown lane 'nope'"),
        ],
    )
    def test_exit_2_with_one_clear_line(
        self, tmp_path: Path, query_set: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
    ) -> None:
        """A bad query set, count or lane: exit 2, one ``fabric: error`` line, no traceback, no receipt."""
        argv = ["--home", str(tmp_path / "home"), "slowcook", "--queries", str(query_set), *args]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("fabric: error:")
        assert message in err
        assert "Traceback" not in err
        assert not (tmp_path / "home" / "slowcook" / "receipt.json").exists()

    def test_a_file_that_is_not_a_receipt_is_left_alone(
        self, tmp_path: Path, query_set: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A previous receipt that cannot be read stops the run (exit 2) before anything is ingested or written."""
        path = tmp_path / "receipt.json"
        path.write_text('{"kind": "something else"}')
        assert _cook(tmp_path / "home", query_set, "--receipt", str(path)) == 2
        assert "not a slow-cook receipt" in capsys.readouterr().err
        assert path.read_text() == '{"kind": "something else"}'
        assert not (tmp_path / "home").exists()


def test_slowcook_after_the_demo_finds_its_notes_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's flow, `fabric demo` then `fabric slowcook` on the same home: the demo's notes are the shipped
    query set's corpus, same source and ids, so nothing is ingested again under other ids."""
    monkeypatch.setenv("FABRIC__embeddings__backend", "none")
    home = tmp_path / "home"
    assert main(["--home", str(home), "demo", "--json"]) == 0
    capsys.readouterr()
    assert main(["--home", str(home), "slowcook", "--json"]) == 0
    corpus = json.loads(capsys.readouterr().out)["corpus"]
    assert (corpus["docs"], corpus["added"], corpus["unchanged"]) == (22, 0, 22)
