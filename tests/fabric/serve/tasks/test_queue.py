"""The ingestion task table: queue order, idempotency rules, failures, bounded history, shutdown."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import fabric.serve.tasks.queue as mod
from fabric.core.errors import IngestError
from fabric.ingest.report import IngestReport, Progress
from fabric.serve.tasks.queue import IngestTask, IngestTasks, TaskStatus
from fabric.serve.tasks.store import TASKS_FILE, TaskStore
from fabric.serve.tasks.submission import SubmitError, parse_submission
from fabric.settings import IngestConfig


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

    async def test_idle_once_the_running_task_reads_finished(
        self, tasks: IngestTasks, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A client that saw its task succeed finds the queue idle (its next small submission is answered inline),
        even while the worker still saves the finished record (a 202 there was a race the service tests hit)."""
        entered, release = threading.Event(), threading.Event()
        evict = tasks.store.evict

        def slow_evict(keep: int) -> None:
            entered.set()
            release.wait(10)
            evict(keep)

        monkeypatch.setattr(tasks.store, "evict", slow_evict)
        task, _ = await tasks.submit(_sub())
        assert await asyncio.to_thread(entered.wait, 10)
        assert (task.status, task.done.is_set()) == (TaskStatus.SUCCEEDED, False)
        assert tasks.idle
        release.set()
        await task.done.wait()

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

    async def test_header_key_mismatch_is_409(self, tasks: IngestTasks) -> None:
        """A header key bound to another body is refused: 409 Conflict, the conventional answer."""
        await tasks.submit(_sub(tag="a"), key="k")
        with pytest.raises(SubmitError) as err:
            await tasks.submit(_sub(tag="b"), key="k")
        assert (err.value.status, err.value.field) == (409, "Idempotency-Key")

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

    async def test_aclose_keeps_unfinished_tasks_for_the_next_start(
        self, tmp_path: Path, runner: ScriptedRunner
    ) -> None:
        """A clean stop leaves running and queued tasks queued in the store; the next start runs both, in order."""
        tasks = IngestTasks(IngestConfig(), home=tmp_path, runner=runner, root=None)
        await tasks.start()
        runner.gate.clear()
        running, _ = await tasks.submit(_sub(tag="a"))
        queued, _ = await tasks.submit(_sub(tag="b"))
        await asyncio.sleep(0.05)
        await tasks.aclose()
        assert (running.status, queued.status) == (TaskStatus.QUEUED, TaskStatus.QUEUED)
        runner.gate.set()
        again = IngestTasks(IngestConfig(), home=tmp_path, runner=runner, root=None)
        assert await again.start() == {"resumed": 0, "failed": 0, "spool_removed": 0}
        for task_id in (running.id, queued.id):
            task = again.get(task_id)
            assert task is not None
            await task.done.wait()
            assert (task.status, task.attempts) == (TaskStatus.SUCCEEDED, 1)
        assert runner.calls[-2:] == [running.source_path, queued.source_path]
        assert not running.source_path.exists()
        await again.aclose()


class TestRestart:
    """What a crashed service finds at start-up: records written as the dead process left them."""

    def _crashed(self, home: Path, *, attempts: int, body: bytes | None, spool: bool) -> IngestTask:
        """A task the dead process was running (status running, its body in the store, maybe its spool file)."""
        sub = _sub(2, tag="crash")
        source = home / "spool" / sub.fingerprint[:32] / "api.jsonl"
        task = IngestTask(
            id="t-crash", key=f"sha256:{sub.fingerprint}", submission=replace(sub, entries=()), source_path=source,
            status=TaskStatus.RUNNING, attempts=attempts,
        )  # fmt: skip
        store = TaskStore(home / TASKS_FILE)
        store.add(task, body)
        store.close()
        if spool:
            source.parent.mkdir(parents=True)
            source.write_bytes(body or b"")
        return task

    async def test_interrupted_task_is_resumed_from_its_stored_body(
        self, tmp_path: Path, runner: ScriptedRunner
    ) -> None:
        """The spool file is gone but the body is in the store: it is written again and the task runs to the end."""
        body = b'{"id": "x", "text": "one"}\n{"id": "y", "text": "two"}\n'
        crashed = self._crashed(tmp_path, attempts=1, body=body, spool=False)
        tasks = IngestTasks(IngestConfig(), home=tmp_path, runner=runner, root=None)
        assert (await tasks.start())["resumed"] == 1
        task = tasks.get(crashed.id)
        assert task is not None
        await task.done.wait()
        assert (task.status, task.attempts) == (TaskStatus.SUCCEEDED, 2)
        assert runner.calls == [crashed.source_path]
        assert not crashed.source_path.exists()
        assert tasks.store.body(crashed.source_path) is None
        await tasks.aclose()

    async def test_task_interrupted_too_often_fails_with_its_reason(
        self, tmp_path: Path, runner: ScriptedRunner
    ) -> None:
        """After MAX_ATTEMPTS interrupted runs the task fails saying why, and its spool file is removed."""
        crashed = self._crashed(tmp_path, attempts=mod.MAX_ATTEMPTS, body=b"{}\n", spool=True)
        tasks = IngestTasks(IngestConfig(), home=tmp_path, runner=runner, root=None)
        assert await tasks.start() == {"resumed": 0, "failed": 1, "spool_removed": 1}
        task = tasks.get(crashed.id)
        assert task is not None
        assert task.status is TaskStatus.FAILED
        assert f"interrupted {mod.MAX_ATTEMPTS} times" in (task.error or "")
        assert runner.calls == []
        assert not crashed.source_path.exists()
        await tasks.aclose()

    async def test_lost_body_fails_the_task(self, tmp_path: Path, runner: ScriptedRunner) -> None:
        """An entry task with neither spool file nor stored body fails naming the loss (never a 404)."""
        crashed = self._crashed(tmp_path, attempts=1, body=None, spool=False)
        tasks = IngestTasks(IngestConfig(), home=tmp_path, runner=runner, root=None)
        await tasks.start()
        task = tasks.get(crashed.id)
        assert task is not None
        assert task.status is TaskStatus.FAILED
        assert "lost" in (task.error or "")
        await tasks.aclose()

    async def test_orphan_spool_files_are_removed(self, tmp_path: Path, runner: ScriptedRunner) -> None:
        """A spool file no task records (a crash between spooling and recording) is removed at start-up."""
        orphan = tmp_path / "spool" / "abc" / "api.jsonl"
        orphan.parent.mkdir(parents=True)
        orphan.write_text("{}\n")
        tasks = IngestTasks(IngestConfig(), home=tmp_path, runner=runner, root=None)
        assert (await tasks.start())["spool_removed"] == 1
        assert not (tmp_path / "spool" / "abc").exists()
        await tasks.aclose()

    async def test_finished_task_answers_after_restart(self, tmp_path: Path, runner: ScriptedRunner) -> None:
        """A finished task's record, report and idempotency key survive a restart."""
        tasks = IngestTasks(IngestConfig(), home=tmp_path, runner=runner, root=None)
        await tasks.start()
        task, _ = await tasks.submit(_sub(tag="keep"), key="k1")
        await task.done.wait()
        await tasks.aclose()
        again = IngestTasks(IngestConfig(), home=tmp_path, runner=runner, root=None)
        await again.start()
        found = again.get(task.id)
        assert found is not None
        assert found.to_dict() == task.to_dict()
        same, created = await again.submit(_sub(tag="keep"), key="k1")
        assert (same.id, created) == (task.id, False)
        await again.aclose()


def test_public_api() -> None:
    """The module exports the task table and its record types."""
    assert set(mod.__all__) == {
        "MAX_ATTEMPTS", "STAGES", "IngestTask", "IngestTasks", "Runner", "StageProgress", "TaskStatus",
    }  # fmt: skip
