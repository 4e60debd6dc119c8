"""Fixtures for command tests: the eval harness with an in-memory engine and a no-op ingestion."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from fabric.cli import main
from fabric.eval import harness
from tests.fabric.eval.fake_engine import FakeEngine

TINY = Path(__file__).resolve().parents[2] / "fixtures" / "beir_tiny"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, list]:
    """Replace the real engine and ingestion; record what was ingested."""
    seen: dict[str, list] = {"ingested": [], "engines": []}

    async def ingest(settings, dataset):
        seen["ingested"].append(settings.home)

    @asynccontextmanager
    async def open_engine(settings):
        engine = FakeEngine(TINY / "corpus.jsonl")
        seen["engines"].append(settings)
        yield engine

    monkeypatch.setattr(harness, "ingest_dataset", ingest)
    monkeypatch.setattr(harness, "open_engine", open_engine)
    monkeypatch.setenv("FABRIC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return seen


@pytest.fixture
def lexical_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No model in these tests: embeddings off, caches in tmp_path."""
    monkeypatch.setenv("FABRIC__embeddings__backend", "none")
    monkeypatch.setenv("FABRIC_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def cli_home(tmp_path: Path, lexical_only: None, capsys: pytest.CaptureFixture[str]) -> Path:
    """A home (embeddings off) holding a Markdown folder of two notes and a JSONL file of two entries."""
    docs = tmp_path / "notes"
    docs.mkdir()
    (docs / "a.md").write_text("# Alpha\n\nQdrant Local Mode keeps vectors.\n")
    (docs / "b.md").write_text("# Beta\n\nSQLite FTS5 indexes text.\n")
    (tmp_path / "kb.jsonl").write_text(
        '{"id": "kb-1", "text": "Alice Smith leads Project Falcon."}\n{"id": "kb-2", "text": "Bob writes docs."}\n'
    )
    h = tmp_path / "h"
    assert main(["--home", str(h), "ingest", str(docs)]) == 0
    assert main(["--home", str(h), "ingest", str(tmp_path / "kb.jsonl")]) == 0
    capsys.readouterr()
    return h
