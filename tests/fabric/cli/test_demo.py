"""Tests for ``fabric demo`` through ``fabric.cli.main`` (real stores, real MiniLM)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabric.cli import main
from fabric.cli.demo import DEMO_QUERIES


class TestDemoCommand:
    def test_demo_shows_all_three_lanes(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The demo ingests the shipped notes and every query is answered by keyword, vector and graph lanes."""
        monkeypatch.setenv("FABRIC_CACHE_DIR", str(tmp_path / "cache"))
        assert main(["--home", str(tmp_path / "home"), "demo", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["ingest"]["docs"] >= 15
        assert out["ingest"]["embeddings"] == "ok"
        assert len(out["results"]) == len(DEMO_QUERIES)
        first = out["results"][0]
        assert {first["lanes"][n]["status"] for n in ("keyword", "vector", "graph")} == {"success"}
        assert "QD-LOCK-01" in " ".join(it["snippet"] for it in first["items"])
        assert out["home"] == str(tmp_path / "home")

    def test_demo_keeps_its_home_for_the_next_search(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The demo's home (the user data folder by default) stays, the demo prints the next command, and that search
        over the home finds items; nothing is written to the working directory."""
        monkeypatch.setenv("FABRIC_CACHE_DIR", str(tmp_path / "cache"))
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
        monkeypatch.delenv("FABRIC_HOME", raising=False)
        monkeypatch.setenv("FABRIC__embeddings__backend", "none")
        cwd = tmp_path / "cwd"
        cwd.mkdir()
        monkeypatch.chdir(cwd)
        assert main(["demo"]) == 0
        out = capsys.readouterr().out
        assert "next, try:\n  fabric search 'Reciprocal Rank Fusion'" in out
        assert (tmp_path / "data" / "retrieval-fabric" / "home" / "ledger.sqlite").is_file()
        assert list(cwd.iterdir()) == []
        assert main(["search", "Reciprocal Rank Fusion", "--json"]) == 0
        captured = capsys.readouterr()
        body = json.loads(captured.out)
        assert body["items"]
        assert "notice" not in body
        assert any("fusion" in it["title"].lower() for it in body["items"][:3])

    def test_demo_without_embeddings_still_answers(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """With embeddings off the demo still answers lexically and says so."""
        monkeypatch.setenv("FABRIC_CACHE_DIR", str(tmp_path / "cache"))
        monkeypatch.setenv("FABRIC__embeddings__backend", "none")
        assert main(["--home", str(tmp_path / "home"), "demo"]) == 0
        out = capsys.readouterr().out
        assert "embeddings: disabled" in out
        assert f"fabric --home {tmp_path / 'home'} search" in out
        assert "keyword:success" in out
