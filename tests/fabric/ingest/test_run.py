"""Tests for fabric.ingest.run: one source into the stores the settings enable, lexical only (no model)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from fabric.core.errors import IngestError
from fabric.ingest.check import check_stores
from fabric.ingest.ledger import stored_chunks
from fabric.ingest.report import Progress
from fabric.ingest.run import run_ingest
from fabric.ingest.writers import build_writers
from fabric.settings import load_settings
from lanes.base import LaneResources


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

    async def test_cancelled_at_any_moment_the_next_run_completes_and_the_stores_agree(self, tmp_path: Path) -> None:
        """The service stops a running ingest by cancelling it: at every step it reports (one store's batch written
        while the others are still writing in worker threads, the ledger's updates), the stores and the ledger close
        only once their thread is done (closing a SQLite connection under a running statement crashes the
        interpreter), and the next run finishes with every store agreeing with the ledger."""
        s = settings(tmp_path)
        src = tmp_path / "notes"
        src.mkdir()

        def rewrite(round_: int) -> None:  # new text each round: every round writes every store
            for i in range(300):
                (src / f"n{i}.md").write_text(f"# Note {i}\n\nAlice Smith met Bob Jones in Paris, round {round_}.\n")

        rewrite(0)
        counted = CancelAt(None)
        await run_ingest(s, src, "markdown", counted)
        assert counted.calls > 5
        for at in range(counted.calls):
            rewrite(at + 1)
            run = asyncio.create_task(run_ingest(s, src, "markdown", CancelAt(at)))
            with contextlib.suppress(asyncio.CancelledError):
                await run
        report = await run_ingest(s, src, "markdown")
        assert (report.docs, report.pending, set(report.stores.values())) == (300, 0, {"ok"})
        writers = build_writers(s, LaneResources(home=s.home))
        try:
            check = await check_stores(s.home, writers, vectors=False)
        finally:
            for writer in writers:
                await writer.aclose()
        assert (check.agree, check.errors) == (True, {})


class CancelAt(Progress):
    """Cancels the running task at its ``at``-th progress report (None: never); counts the reports."""

    def __init__(self, at: int | None) -> None:
        self.at = at
        self.calls = 0

    def _tick(self) -> None:
        if self.calls == self.at:
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
        self.calls += 1

    def stage(self, name: str, total: int) -> None:
        self._tick()

    def advance(self, name: str, n: int) -> None:
        self._tick()
