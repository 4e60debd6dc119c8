"""Tests for ``fabric delete`` through ``fabric.cli.main`` over a real embedded home."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import fabric.cli.delete as delete_mod
from fabric.cli import main

pytestmark = pytest.mark.usefixtures("lexical_only")


def _ids(home: Path, db: str) -> set[str]:
    with sqlite3.connect(home / db) as conn:
        return {r[0] for r in conn.execute("SELECT id FROM chunks")}


class TestDeleteCommand:
    def test_delete_by_id(self, cli_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """--id removes the entry from the keyword and graph stores; --json prints the report."""
        assert main(["--home", str(cli_home), "delete", "--id", "kb-1", "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["ids"] == ["kb-1"]
        assert set(report["stores"].values()) == {"ok"}
        assert "kb-1" not in _ids(cli_home, "keyword.sqlite")
        assert "kb-1" not in _ids(cli_home, "graph.sqlite")
        assert "kb-2" in _ids(cli_home, "keyword.sqlite")

    def test_delete_by_source_path(self, cli_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """--source with the folder's path removes every chunk of that folder."""
        assert main(["--home", str(cli_home), "delete", "--source", str(tmp_path / "notes")]) == 0
        assert "deleted 2 of 2" in capsys.readouterr().out
        assert _ids(cli_home, "keyword.sqlite") == {"kb-1", "kb-2"}

    def test_unknown_id_and_no_argument_exit_2(self, cli_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Nothing stored under the id, or nothing asked: one line, exit 2."""
        assert main(["--home", str(cli_home), "delete", "--id", "nope"]) == 2
        assert "no stored entry with id 'nope'" in capsys.readouterr().err
        assert main(["--home", str(cli_home), "delete"]) == 2
        assert "--id ID" in capsys.readouterr().err


def test_public_api() -> None:
    """The module exports register and run."""
    assert set(delete_mod.__all__) == {"register", "run"}
