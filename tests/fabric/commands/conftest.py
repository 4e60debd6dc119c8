"""Fixtures for command tests: the eval harness with an in-memory engine and a no-op ingestion."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path

import pytest

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
