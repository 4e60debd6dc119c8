"""Ingestion tasks shared by two replicas, over one real PostgreSQL database and over one local state folder
(SQLite and file locks, :mod:`fabric.serve.state.local`): visible from both, run exactly once, one at a time per
tenant, idempotency keys shared, a dead replica's task taken over after a repair."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import fabric.serve.tasks.shared as mod
from fabric.ingest.report import IngestReport, Progress
from fabric.serve.state.base import ReplicaState
from fabric.serve.state.local import LocalState
from fabric.serve.state.postgres import SharedState
from fabric.serve.tasks.shared import SharedIngestTasks
from fabric.serve.tasks.store import IngestTask, TaskStatus
from fabric.serve.tasks.submission import parse_submission
from fabric.settings import IngestConfig


@pytest.fixture(params=["postgres", "sqlite"])
def make_state(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], ReplicaState]:
    """New handles on one shared state: a fresh PostgreSQL database, or one local state folder."""
    if request.param == "postgres":
        url = request.getfixturevalue("state_url")
        return lambda: SharedState(url)
    return lambda: LocalState(tmp_path / "replicas")


class Ledger:
    """What the replicas' runners did: who ran which source, and the most runs at once."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, Path]] = []
        self.active = 0
        self.most = 0
        self.gate = asyncio.Event()
        self.gate.set()
        self.repairs: list[str] = []

    def runner(self, name: str) -> Callable[[Path, str | None, Progress], Any]:
        async def run(path: Path, fmt: str | None, progress: Progress) -> IngestReport:
            assert await asyncio.to_thread(
                path.is_file
            )  # the spool file is there (written back from the database when missing)
            self.runs.append((name, path))
            self.active += 1
            self.most = max(self.most, self.active)
            try:
                progress.stage("load", 1)
                await self.gate.wait()
                await asyncio.sleep(0.01)
                progress.advance("load", 1)
            finally:
                self.active -= 1
            return IngestReport(source=str(path), format=fmt or "", docs=1, stores={"sqlite_fts": "ok"})

        return run

    def repair(self, name: str) -> Callable[[], Any]:
        async def repair() -> None:
            self.repairs.append(name)

        return repair


def _sub(tag: str, n: int = 1) -> Any:
    entries = [{"id": f"{tag}-{i}", "text": f"text {i}"} for i in range(n)]
    return parse_submission({"entries": entries}, IngestConfig(), None)


@pytest.fixture
async def replicas(
    make_state: Callable[[], ReplicaState], tmp_path: Path
) -> AsyncIterator[tuple[SharedIngestTasks, SharedIngestTasks, Ledger]]:
    """Two started replicas of one tenant over one shared state and one home."""
    ledger, states, made = Ledger(), [make_state(), make_state()], []
    for name, state in zip("ab", states, strict=True):
        await state.open()
        t = SharedIngestTasks(
            IngestConfig(max_queued=50, replica_poll_s=0.05), home=tmp_path, runner=ledger.runner(name), root=None,
            state=state, owner=f"replica-{name}", repair=ledger.repair(name),
        )  # fmt: skip
        await t.start()
        made.append(t)
    yield made[0], made[1], ledger
    for t in made:
        await t.aclose()
    for state in states:
        await state.aclose()


async def _finished(tasks: SharedIngestTasks, task_id: str) -> IngestTask:
    for _ in range(2000):
        found = await tasks.aget(task_id)
        if found is not None and found.finished:
            return found
        await asyncio.sleep(0.01)
    raise AssertionError(f"task {task_id} did not finish")


async def test_submitted_on_a_is_visible_and_waitable_on_b(
    replicas: tuple[SharedIngestTasks, SharedIngestTasks, Ledger],
) -> None:
    """A task submitted through A is read through B at once and reaches succeeded, seen from B."""
    a, b, _ = replicas
    task, created = await a.submit(_sub("x"))
    assert created
    seen = await b.aget(task.id)
    assert seen is not None
    assert seen.status in (TaskStatus.QUEUED, TaskStatus.RUNNING, TaskStatus.SUCCEEDED)
    done = await b.wait(seen)
    assert (done.status, done.report is not None) == (TaskStatus.SUCCEEDED, True)


async def test_every_task_runs_exactly_once_one_at_a_time(
    replicas: tuple[SharedIngestTasks, SharedIngestTasks, Ledger],
) -> None:
    """Twelve tasks submitted through both replicas each run once, never two at a time, all succeed."""
    a, b, ledger = replicas
    subs = [(a if i % 2 else b).submit(_sub(f"t{i}")) for i in range(12)]
    made = [task for task, _ in await asyncio.gather(*subs)]
    done = [await _finished(b, t.id) for t in made]
    assert all(t.status is TaskStatus.SUCCEEDED and t.attempts == 1 for t in done)
    assert sorted(str(p) for _, p in ledger.runs) == sorted(str(t.source_path) for t in made)
    assert ledger.most == 1
    assert ledger.repairs == []


async def test_idempotency_key_is_shared(replicas: tuple[SharedIngestTasks, SharedIngestTasks, Ledger]) -> None:
    """One key sent to both replicas at once makes one task; the other answer is that task."""
    a, b, ledger = replicas
    ledger.gate.clear()
    (t1, c1), (t2, c2) = await asyncio.gather(a.submit(_sub("k"), key="same"), b.submit(_sub("k"), key="same"))
    assert t1.id == t2.id
    assert sorted([c1, c2]) == [False, True]
    ledger.gate.set()
    assert (await _finished(a, t1.id)).status is TaskStatus.SUCCEEDED
    assert len(ledger.runs) == 1


async def test_a_dead_replicas_task_is_repaired_then_resumed(
    replicas: tuple[SharedIngestTasks, SharedIngestTasks, Ledger],
) -> None:
    """A task left running by a replica that died (and its lost spool file) is taken over: repair, then run 2."""
    a, b, ledger = replicas
    ledger.gate.clear()
    task, _ = await a.submit(_sub("d", 3))
    for _ in range(2000):  # the task is now running on one of them
        if ledger.runs:
            break
        await asyncio.sleep(0.01)
    runner = a if ledger.runs[0][0] == "a" else b
    other = b if runner is a else a
    await other._writing.acquire()  # the other replica's worker waits until the scene is set
    try:
        # the runner dies: its worker stops (its run is cut off), leaving the record as a dead runner does
        worker, runner._worker = runner._worker, None
        assert worker is not None
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker
        await asyncio.to_thread(_force, other, task.id)
        await asyncio.to_thread(task.source_path.unlink, missing_ok=True)  # lost: written back from the database
    finally:
        other._writing.release()
    ledger.gate.set()
    done = await _finished(other, task.id)
    assert (done.status, done.attempts) == (TaskStatus.SUCCEEDED, 2)
    assert ledger.repairs == [other.owner[-1]]
    assert other.taken_over == 1


def _force(tasks: SharedIngestTasks, task_id: str) -> None:
    """Write the record as a runner that died mid-run leaves it: running, first attempt (its clean-stop hook set
    it back to queued, which a killed process never gets to do)."""
    state = tasks.state
    if isinstance(state, LocalState):
        with state.transaction() as db:
            db.execute("UPDATE fabric_tasks SET status = 'running', attempts = 1 WHERE id = ?", (task_id,))
        return
    assert isinstance(state, SharedState)
    with state.sync.connection() as conn:
        conn.execute("UPDATE fabric_tasks SET status = 'running', attempts = 1 WHERE id = %s", (task_id,))


async def test_exclusive_runs_only_for_the_lock_holder(
    replicas: tuple[SharedIngestTasks, SharedIngestTasks, Ledger],
) -> None:
    """A job under the writer lock runs on one replica; the other is told it did not run (None)."""
    a, b, _ = replicas
    release = asyncio.Event()
    entered = asyncio.Event()

    async def hold() -> str:
        entered.set()
        await release.wait()
        return "held"

    async def job() -> str:
        return "ran"

    for _ in range(1000):  # A's own worker may hold the lock for a moment (its poll): try again
        holding = asyncio.create_task(a.exclusive(hold))
        waiting = asyncio.ensure_future(entered.wait())
        await asyncio.wait({holding, waiting}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if entered.is_set():
            break
        await asyncio.sleep(0.01)
    assert entered.is_set()
    assert await b.exclusive(job) is None  # another replica holds it
    assert await a.exclusive(job) is None  # and within A, the holder excludes a second job
    release.set()
    assert await holding == "held"
    for _ in range(1000):  # the workers' polls take the lock briefly: it is soon free for B
        if (got := await b.exclusive(job)) is not None:
            break
        await asyncio.sleep(0.01)
    assert got == "ran"


async def test_a_cancelled_submission_does_not_keep_the_keys_mutex(
    replicas: tuple[SharedIngestTasks, SharedIngestTasks, Ledger],
) -> None:
    """A submission cancelled while it waits for its key's mutex gives the mutex back once it gets it, so the
    key is not blocked on every replica."""
    a, b, _ = replicas
    held = await asyncio.to_thread(b.shared.lock_key, "key:busy")
    waiting = asyncio.create_task(a.submit(_sub("c"), key="busy"))
    await asyncio.sleep(0.2)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await asyncio.to_thread(b.shared.unlock_key, held, "key:busy")
    task, created = await b.submit(_sub("c"), key="busy")
    assert created
    assert (await _finished(a, task.id)).status is TaskStatus.SUCCEEDED


async def test_aclose_stops_a_worker_woken_just_before(make_state: Callable[[], ReplicaState], tmp_path: Path) -> None:
    """A submission's wake-up that lands just before ``aclose`` cancels the idle worker does not eat the
    cancellation (``asyncio.wait_for`` does on Python 3.11), so ``aclose`` returns instead of waiting forever."""
    state, ledger = make_state(), Ledger()
    await state.open()
    tasks = SharedIngestTasks(
        IngestConfig(max_queued=50), home=tmp_path, runner=ledger.runner("a"), root=None, state=state,
        owner="replica-a", poll_s=30.0,
    )  # fmt: skip
    try:
        await tasks.start()
        for _ in range(1000):  # until the worker drained the empty queue and waits (30 s) for a wake-up
            if tasks._queue._getters:  # type: ignore[attr-defined]
                break
            await asyncio.sleep(0.01)
        assert tasks._queue._getters  # type: ignore[attr-defined]
        wake = IngestTask(id="w", key="key:w", submission=_sub("w"), source_path=tmp_path / "w")
        tasks._queue.put_nowait(wake)  # what submit() does once the task is stored: the worker wakes
        worker = tasks._worker
        assert worker is not None
        async with asyncio.timeout(10) as limit:
            await tasks.aclose()  # before the fix: waited for the worker until this timeout, which it then ate
        assert not limit.expired()
        assert worker.done()
    finally:
        await tasks.aclose()
        await state.aclose()


def test_public_api() -> None:
    """The module exports the shared queue, its timings and the replica's name."""
    assert set(mod.__all__) == {"HEARTBEAT_S", "SPOOL_GRACE_S", "ReplicaTaskStore", "SharedIngestTasks", "replica_name"}
