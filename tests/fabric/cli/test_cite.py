"""Tests for ``fabric cite`` through ``fabric.cli.main``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabric.cli import cite, main
from fabric.core.errors import QueryError
from fabric.core.logs import configure_logging

CONFIG = """
schema = 1
[lanes.keyword]
backend = "fake"
kind = "keyword"
options = { hits = 5 }
[lanes.vector]
enabled = false
backend = "fake"
kind = "vector"
[lanes.graph]
enabled = false
backend = "fake"
kind = "graph"
"""

RESULT = {
    "query": "aspirin",
    "items": [
        {
            "id": "a",
            "title": "Trial A",
            "url": "https://a.org/1",
            "snippet": "Aspirin reduced mortality by 25% in adults.",
        },
        {
            "id": "b",
            "title": "Trial B",
            "url": "https://b.org/2",
            "snippet": "Aspirin reduced mortality by 12% in adults.",
        },
        {"id": "c", "title": "Statins", "url": "https://c.org/3", "snippet": "Statins lower LDL cholesterol."},
    ],
}


@pytest.fixture(autouse=True)
def quiet() -> None:
    """Logs at CRITICAL only."""
    configure_logging(level="CRITICAL")


@pytest.fixture
def items_file(tmp_path: Path) -> Path:
    """A `fabric search --json` result on disk."""
    path = tmp_path / "results.json"
    path.write_text(json.dumps(RESULT))
    return path


class TestCiteCommand:
    def test_public_api(self) -> None:
        """The command module exports register, run and the JSON reader."""
        assert sorted(cite.__all__) == ["hits_from_json", "register", "run"]

    def test_items_json(self, items_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """--items --json prints markers, bibliography and the numbers disagreement."""
        answer = "Aspirin reduced mortality in adults. Statins lower LDL cholesterol."
        assert main(["cite", "--answer", answer, "--items", str(items_file), "--json"]) == 0
        body = json.loads(capsys.readouterr().out)
        assert body["text"] == "Aspirin reduced mortality in adults [1][2]. Statins lower LDL cholesterol [3]."
        assert [b["id"] for b in body["bibliography"]] == ["a", "b", "c"]
        assert body["disagreements"][0]["kind"] == "numbers"

    def test_plain_output(self, items_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Without --json the annotated text, the bibliography and disagreements are printed."""
        answer = tmp_path / "answer.txt"
        answer.write_text("Aspirin reduced mortality in adults.")
        assert main(["cite", "--answer-file", str(answer), "--items", str(items_file)]) == 0
        out = capsys.readouterr().out
        assert "[1] Trial A — https://a.org/1" in out
        assert "disagree on" in out

    def test_query_runs_engine(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """--query fetches passages through the engine (fake lanes here)."""
        cfg = tmp_path / "user.toml"
        cfg.write_text(CONFIG)
        argv = ["--config", str(cfg), "--home", str(tmp_path / "home"), "cite", "--query", "anything"]
        assert main([*argv, "--answer", "Text keyword 3.", "--json"]) == 0
        body = json.loads(capsys.readouterr().out)
        assert body["bibliography"][0]["id"] == "keyword-3"

    def test_bad_items_exit_2(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Items that are not JSON exit 2 with one line naming the field."""
        bad = tmp_path / "bad.json"
        bad.write_text("{nope")
        assert main(["cite", "--answer", "x", "--items", str(bad)]) == 2
        assert "items" in capsys.readouterr().err

    def test_empty_answer_exit_2(self, items_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """An empty answer exits 2."""
        assert main(["cite", "--answer", "  ", "--items", str(items_file)]) == 2
        assert "answer" in capsys.readouterr().err

    def test_answer_over_the_work_budget_exits_2(self, items_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """An answer of more sentences than one alignment takes exits 2 with one line naming it, no traceback."""
        assert main(["cite", "--answer", "Aspirin works! " * 201, "--items", str(items_file)]) == 2
        err = capsys.readouterr().err
        assert "answer: at most 200 sentences per alignment, got 201" in err
        assert "Traceback" not in err

    def test_hits_from_json_rejects_missing_id(self) -> None:
        """An item without an id is refused with a QueryError."""
        with pytest.raises(QueryError, match="id"):
            cite.hits_from_json([{"title": "x"}])
