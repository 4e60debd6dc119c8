"""Tests for fabric.ingest.run: one source into the stores the settings enable, lexical only (no model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric.config import load_settings
from fabric.errors import IngestError
from fabric.ingest.ledger import stored_chunks
from fabric.ingest.pipeline import Progress
from fabric.ingest.run import run_ingest


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    d = tmp_path / "notes"
    d.mkdir()
    (d / "a.md").write_text("# Alpha\n\nQdrant local mode.\n")
    (d / "b.md").write_text("# Beta\n\nSQLite FTS5.\n")
    return d


def settings(tmp_path: Path):
    env = {
        "FABRIC_HOME": str(tmp_path / "home"),
        "FABRIC_CACHE_DIR": str(tmp_path / "cache"),
        "FABRIC__embeddings__backend": "none",
    }
    return load_settings(env=env)


class RecordingProgress(Progress):
    def __init__(self) -> None:
        self.stages: list[str] = []

    def stage(self, name: str, total: int) -> None:
        self.stages.append(name)


class TestRunIngest:
    async def test_ingests_into_the_settings_home(self, tmp_path: Path, notes: Path) -> None:
        """Both notes land in the enabled lexical stores under ``settings.home``, recorded in its ledger."""
        s = settings(tmp_path)
        report = await run_ingest(s, notes, "markdown")
        assert (report.docs, report.created) == (2, 2)
        assert report.embeddings.startswith("disabled")
        assert set(report.stores.values()) == {"ok"}
        assert stored_chunks(s.home) == 2

    async def test_reports_each_stage_to_the_progress(self, tmp_path: Path, notes: Path) -> None:
        """The progress sink hears load, chunk and write (no embed stage without an embedder)."""
        progress = RecordingProgress()
        await run_ingest(settings(tmp_path), notes, None, progress)
        assert progress.stages[:2] == ["load", "chunk"]
        assert "write" in progress.stages
        assert progress.stages[-1] == "index"  # the stores' work after writing (the vector store's graph)

    async def test_reports_the_index_stage(self, tmp_path: Path, notes: Path) -> None:
        """The stores' finishing work is timed as the ``index`` stage and counted in the total."""
        report = await run_ingest(settings(tmp_path), notes, "markdown")
        assert report.seconds["index"] >= 0
        assert report.seconds["total"] >= report.seconds["index"]

    async def test_a_second_run_rewrites_nothing(self, tmp_path: Path, notes: Path) -> None:
        """The writers are closed after each run, so a second run reopens the stores and finds every chunk."""
        s = settings(tmp_path)
        await run_ingest(s, notes, "markdown")
        again = await run_ingest(s, notes, "markdown")
        assert (again.created, again.unchanged) == (0, 2)

    async def test_a_missing_source_is_an_ingest_error(self, tmp_path: Path) -> None:
        """A path that does not exist is reported as IngestError."""
        with pytest.raises(IngestError):
            await run_ingest(settings(tmp_path), tmp_path / "absent", "markdown")
