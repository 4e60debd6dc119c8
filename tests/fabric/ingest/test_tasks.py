"""The ingestion task table: queue order, idempotency rules, failures, bounded history, shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import fabric.ingest.tasks as mod
from fabric.config import IngestConfig
from fabric.errors import IngestError
from fabric.ingest.pipeline import IngestReport, Progress
from fabric.ingest.submission import SubmitError, parse_submission
from fabric.ingest.tasks import IngestTasks, TaskStatus


class ScriptedRunner:
    """A pipeline stand-in: records calls, can be held at a gate, fails or crashes on request."""

    def __init__(self) -> None:
        self.calls: list[Path] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail: Exception | None = None
        self.stores = {"sqlite_fts": "ok"}

    async def __call__(self, path: Path, fmt: str | None, progress: Progress) -> IngestReport:
        self.calls.append(path)
        progress.stage("load", 1)
        await self.gate.wait()
        progress.advance("load", 1)
        if self.fail is not None:
            raise self.fail
        return IngestReport(source=str(path), format=fmt or "", docs=1, stores=dict(self.stores))


def _sub(n: int = 1, tag: str = "a", **body: Any) -> Any:
    entries = [{"id": f"{tag}-{i}", "text": f"text {i}"} for i in range(n)]
    return parse_submission({"entries": entries, **body}, IngestConfig(), None)


@pytest.fixture
def runner() -> ScriptedRunner:
    """A runner that finishes at once."""
    return ScriptedRunner()


@pytest.fixture
async def tasks(tmp_path: Path, runner: ScriptedRunner) -> AsyncIterator[IngestTasks]:
    """A started task table with a small history and queue."""
    t = IngestTasks(IngestConfig(history=3, max_queued=2), home=tmp_path, runner=runner, root=None)
    await t.start()
    yield t
    await t.aclose()


class TestLifecycle:
    async def test_task_runs_to_succeeded(self, tasks: IngestTasks, runner: ScriptedRunner) -> None:
        """A submitted task is queued, run with the spool file, and succeeds with the report."""
        task, created = await tasks.submit(_sub())
        assert (created, task.status) == (True, TaskStatus.QUEUED)
        await task.done.wait()
        assert (task.status, task.report is not None, task.error) == (TaskStatus.SUCCEEDED, True, None)
        assert runner.calls == [task.source_path]
        assert task.progress["load"].done == 1

    async def test_record_keeps_the_count_not_the_entries(self, tasks: IngestTasks) -> None:
        """Once spooled, a task record holds the number of entries, not the entries themselves."""
        task, _ = await tasks.submit(_sub(4))
        assert (task.submission.entries, task.to_dict()["source"]["entries"]) == ((), 4)

    async def test_tasks_run_one_at_a_time_in_order(self, tasks: IngestTasks, runner: ScriptedRunner) -> None:
        """A second task waits (queued) while the first runs."""
        runner.gate.clear()
        first, _ = await tasks.submit(_sub(tag="a"))
        second, _ = await tasks.submit(_sub(tag="b"))
        await asyncio.sleep(0)
        assert (first.status, second.status, tasks.idle) == (TaskStatus.RUNNING, TaskStatus.QUEUED, False)
        runner.gate.set()
        await second.done.wait()
        assert runner.calls == [first.source_path, second.source_path]
        assert first.finished_at is not None
        assert second.started_at is not None
        assert first.finished_at <= second.started_at

    async def test_spool_holds_the_entries_until_the_task_ends(
        self, tasks: IngestTasks, runner: ScriptedRunner
    ) -> None:
        """Entries are spooled as JSONL for the loader, and the file goes when the task ends."""
        runner.gate.clear()
        task, _ = await tasks.submit(_sub(2))
        assert task.source_path.read_text().count("\n") == 2
        runner.gate.set()
        await task.done.wait()
        assert not task.source_path.exists()


class TestFailures:
    async def test_ingest_error_fails_the_task(self, tasks: IngestTasks, runner: ScriptedRunner) -> None:
        """A pipeline error is recorded as the task's error text."""
        runner.fail = IngestError("entries: cannot read")
        task, _ = await tasks.submit(_sub())
        await task.done.wait()
        assert (task.status, task.error) == (TaskStatus.FAILED, "entries: cannot read")

    async def test_crash_is_recorded_and_worker_survives(self, tasks: IngestTasks, runner: ScriptedRunner) -> None:
        """An unexpected exception fails its task without a traceback in the record; the next task runs."""
        runner.fail = ZeroDivisionError("boom")
        bad, _ = await tasks.submit(_sub(tag="a"))
        await bad.done.wait()
        runner.fail = None
        good, _ = await tasks.submit(_sub(tag="b"))
        await good.done.wait()
        assert (bad.error, good.status) == ("internal error: ZeroDivisionError", TaskStatus.SUCCEEDED)

    async def test_failed_store_fails_the_task_with_report(self, tasks: IngestTasks, runner: ScriptedRunner) -> None:
        """A store the pipeline could not write makes the task fail, keeping the report."""
        runner.stores = {"sqlite_fts": "ok", "qdrant": "error: locked"}
        task, _ = await tasks.submit(_sub())
        await task.done.wait()
        assert task.status is TaskStatus.FAILED
        assert task.error == "store(s) failed: qdrant: error: locked"
        assert task.report is not None
        assert task.report["stores"]["qdrant"] == "error: locked"

    async def test_failed_task_is_replaced_on_retry(self, tasks: IngestTasks, runner: ScriptedRunner) -> None:
        """Re-submitting after a failure starts a new task (a retry), not the failed one."""
        runner.fail = IngestError("down")
        first, _ = await tasks.submit(_sub())
        await first.done.wait()
        runner.fail = None
        second, created = await tasks.submit(_sub())
        await second.done.wait()
        assert (created, second.id != first.id, second.status) == (True, True, TaskStatus.SUCCEEDED)


class TestIdempotency:
    async def test_same_content_while_queued_is_one_task(self, tasks: IngestTasks, runner: ScriptedRunner) -> None:
        """The same body submitted twice before it ran yields one task and one pipeline run."""
        runner.gate.clear()
        first, _ = await tasks.submit(_sub())
        again, created = await tasks.submit(_sub(**{"async": True}))
        runner.gate.set()
        await first.done.wait()
        assert (again is first, created, len(runner.calls)) == (True, False, 1)

    async def test_concurrent_identical_submissions_make_one_task(self, tasks: IngestTasks) -> None:
        """Simultaneous retries (spooling in flight) still resolve to one task."""
        results = await asyncio.gather(*(tasks.submit(_sub(50)) for _ in range(5)))
        assert len({t.id for t, _ in results}) == 1
        assert sum(created for _, created in results) == 1

    async def test_header_key_mismatch_is_422(self, tasks: IngestTasks) -> None:
        """A header key bound to another body is refused."""
        await tasks.submit(_sub(tag="a"), key="k")
        with pytest.raises(SubmitError) as err:
            await tasks.submit(_sub(tag="b"), key="k")
        assert (err.value.status, err.value.field) == (422, "Idempotency-Key")

    async def test_path_without_key_reruns_after_success(self, tmp_path: Path, runner: ScriptedRunner) -> None:
        """A path body is matched only while queued or running: files may change, so a later one re-runs."""
        (tmp_path / "docs").mkdir()
        sub = parse_submission({"path": "docs"}, IngestConfig(), tmp_path)
        tasks = IngestTasks(IngestConfig(), home=tmp_path / "home", runner=runner, root=tmp_path)
        await tasks.start()
        try:
            first, _ = await tasks.submit(sub)
            await first.done.wait()
            second, created = await tasks.submit(sub)
            assert (created, second is first) == (True, False)
        finally:
            await tasks.aclose()


class TestBounds:
    async def test_full_queue_is_503(self, tasks: IngestTasks, runner: ScriptedRunner) -> None:
        """Beyond max_queued waiting tasks a submission is refused with 503."""
        runner.gate.clear()
        await tasks.submit(_sub(tag="run"))
        await asyncio.sleep(0)  # the worker takes it: running, not queued
        await tasks.submit(_sub(tag="q1"))
        await tasks.submit(_sub(tag="q2"))
        with pytest.raises(SubmitError) as err:
            await tasks.submit(_sub(tag="q3"))
        assert err.value.status == 503
        runner.gate.set()

    async def test_history_keeps_the_newest_finished(self, tasks: IngestTasks) -> None:
        """Only the last `history` finished records are kept; older ids become unknown."""
        done = []
        for i in range(5):
            task, _ = await tasks.submit(_sub(tag=str(i)))
            await task.done.wait()
            done.append(task.id)
        assert [tasks.get(i) is not None for i in done] == [False, False, True, True, True]

    async def test_aclose_fails_unfinished_tasks(self, tmp_path: Path, runner: ScriptedRunner) -> None:
        """Stopping the service records running and queued tasks as failed, and frees their spool files."""
        tasks = IngestTasks(IngestConfig(), home=tmp_path, runner=runner, root=None)
        await tasks.start()
        runner.gate.clear()
        running, _ = await tasks.submit(_sub(tag="a"))
        queued, _ = await tasks.submit(_sub(tag="b"))
        await asyncio.sleep(0)
        await tasks.aclose()
        assert (running.status, queued.status) == (TaskStatus.FAILED, TaskStatus.FAILED)
        assert "stopped" in (queued.error or "")
        assert "stopped" in (running.error or "")
        assert not running.source_path.exists()
        assert not queued.source_path.exists()


def test_public_api() -> None:
    """The module exports the task table and its record types."""
    assert set(mod.__all__) == {"STAGES", "IngestTask", "IngestTasks", "Runner", "StageProgress", "TaskStatus"}
