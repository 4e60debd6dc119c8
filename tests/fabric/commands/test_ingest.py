"""Tests for ``fabric ingest`` through ``fabric.cli.main``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabric.cli import main


@pytest.fixture(autouse=True)
def _lexical_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No model in these tests: embeddings off, caches in tmp_path."""
    monkeypatch.setenv("FABRIC__embeddings__backend", "none")
    monkeypatch.setenv("FABRIC_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    """A folder with two notes."""
    d = tmp_path / "notes"
    d.mkdir()
    (d / "a.md").write_text("# Alpha\n\nQdrant local mode.\n")
    (d / "b.md").write_text("# Beta\n\nSQLite FTS5.\n")
    return d


class TestIngestCommand:
    def test_json_summary(self, docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """--json prints the counts, per-stage seconds and docs/s, and the embeddings status."""
        assert main(["--home", str(tmp_path / "h"), "ingest", str(docs), "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert (out["format"], out["docs"], out["created"]) == ("markdown", 2, 2)
        assert set(out["docs_per_s"]) >= {"load", "chunk", "embed", "write"}
        assert out["embeddings"].startswith("disabled")

    def test_rerun_is_idempotent(self, docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A second run reports every chunk unchanged."""
        argv = ["--home", str(tmp_path / "h"), "ingest", str(docs), "--json"]
        main(argv)
        capsys.readouterr()
        main(argv)
        out = json.loads(capsys.readouterr().out)
        assert (out["unchanged"], out["created"]) == (2, 0)

    def test_human_summary(self, docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Without --json a readable summary is printed."""
        assert main(["--home", str(tmp_path / "h"), "ingest", str(docs)]) == 0
        assert "created 2" in capsys.readouterr().out

    def test_missing_path_exits_2(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A missing path is a clear error with exit code 2."""
        assert main(["--home", str(tmp_path / "h"), "ingest", str(tmp_path / "nope")]) == 2
        assert "does not exist" in capsys.readouterr().err

    def test_wrong_format_exits_2(self, docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Forcing jsonl on Markdown fails with exit 2 and a message naming the file, no traceback."""
        assert main(["--home", str(tmp_path / "h"), "ingest", str(docs / "a.md"), "--format", "jsonl"]) == 2
        err = capsys.readouterr().err
        assert "a.md:1: invalid JSON" in err
        assert "Traceback" not in err
