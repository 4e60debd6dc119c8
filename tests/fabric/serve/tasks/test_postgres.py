"""One tenant's task records in the shared database: the embedded store's behaviour, plus the writer lock, the
claim and the fence that replicas rely on."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

import fabric.serve.tasks.postgres as mod
from fabric.serve.state.postgres import SharedState
from fabric.serve.tasks.postgres import SharedTaskStore
from fabric.serve.tasks.store import IngestTask, StageProgress, TaskStatus
from fabric.serve.tasks.submission import parse_submission
from fabric.settings import IngestConfig


def _task(tid: str, *, tenant: str = "default", key: str = "key:k") -> IngestTask:
    sub = parse_submission({"entries": [{"id": tid, "text": "t"}]}, IngestConfig(), None)
    return IngestTask(
        id=tid, key=key, submission=replace(sub, entries=()), source_path=Path(f"/h/spool/{tid}/api.jsonl"),
        tenant=tenant,
    )  # fmt: skip


@pytest.fixture
def states(state_url: str) -> Iterator[list[SharedState]]:
    """Two replicas' pools over one database."""
    pair = [SharedState(state_url, max_size=3), SharedState(state_url, max_size=3)]
    for s in pair:
        s.open_sync()
    yield pair
    for s in pair:
        s.sync.close()


@pytest.fixture
def a(states: list[SharedState]) -> Iterator[SharedTaskStore]:
    store = SharedTaskStore(states[0], "default", "replica-a")
    yield store
    store.close()


@pytest.fixture
def b(states: list[SharedState]) -> Iterator[SharedTaskStore]:
    store = SharedTaskStore(states[1], "default", "replica-b")
    yield store
    store.close()


class TestRecords:
    def test_a_record_written_by_one_replica_reads_the_same_on_another(
        self, a: SharedTaskStore, b: SharedTaskStore
    ) -> None:
        """Every field A writes is what B reads (the API record is identical), body and key included."""
        task = _task("t1")
        a.add(task, b'{"id": "t1"}\n')
        assert b.body(task.source_path) == b'{"id": "t1"}\n'
        assert b.spooled() == {str(task.source_path)}
        task.status, task.attempts = TaskStatus.FAILED, 2
        task.started_at = task.finished_at = datetime(2026, 1, 2, tzinfo=UTC)
        task.progress["embed"] = StageProgress(done=3, total=5)
        task.report, task.error, task.conflicts = {"docs": 1}, "boom", {"x": "api"}
        a.save(task)
        found = b.get("t1")
        assert found is not None
        assert found.to_dict() == task.to_dict()
        by_key = b.by_key("default", "key:k")
        assert by_key is not None
        assert by_key.id == "t1"
        assert b.body(task.source_path) is None  # finished: the body went
        assert b.counts() == {"queued": 0, "running": 0, "succeeded": 0, "failed": 1}

    def test_tasks_are_per_tenant(self, a: SharedTaskStore, states: list[SharedState]) -> None:
        """Another tenant's store does not see the task, its key or its counts."""
        a.add(_task("t1"), None)
        other = SharedTaskStore(states[1], "acme", "replica-b")
        assert other.get("t1") is None
        assert other.by_key("acme", "key:k") is None
        assert other.counts()["queued"] == 0
        assert other.unfinished() == []
        assert [t.id for t in a.unfinished()] == ["t1"]

    def test_history_is_bounded(self, a: SharedTaskStore) -> None:
        """Finished records beyond ``keep`` go, oldest first, with their keys; unfinished ones stay."""
        for i in range(4):
            task = _task(f"t{i}", key=f"key:{i}")
            a.add(task, None)
            if i < 3:
                task.status, task.finished_at = TaskStatus.SUCCEEDED, datetime(2026, 1, 1 + i, tzinfo=UTC)
                a.save(task)
        assert a.evict(1) == 2
        assert [t for t in ("t0", "t1", "t2", "t3") if a.get(t)] == ["t2", "t3"]
        assert a.by_key("default", "key:0") is None


class TestReplicas:
    def test_one_writer_per_tenant_until_its_connection_ends(self, a: SharedTaskStore, b: SharedTaskStore) -> None:
        """A holds the tenant's writer lock; B cannot take it until A releases it or A's connection is gone."""
        assert a.try_writer()
        assert not a.try_writer()  # not re-entrant: a second holder in A is refused too
        assert not b.try_writer()
        assert a.writer_alive()
        a.release_writer()
        assert b.try_writer()
        assert not a.try_writer()
        assert b._lockconn is not None
        b._lockconn.close()  # the process holding it dies: the server ends its session and drops the lock
        assert not b.writer_alive()
        for _ in range(500):  # the server notices the closed socket within moments
            if a.try_writer():
                break
            time.sleep(0.01)
        assert a.writer_alive()

    def test_claim_takes_the_oldest_and_names_its_runner(self, a: SharedTaskStore, b: SharedTaskStore) -> None:
        """The claim returns tasks in queue order; a task found running is returned as recorded (orphaned)."""
        first, second = _task("t1", key="key:1"), _task("t2", key="key:2")
        a.add(first, None)
        a.add(second, None)
        claimed = b.claim()
        assert claimed is not None
        assert (claimed.id, claimed.status) == ("t1", TaskStatus.QUEUED)
        claimed.status = TaskStatus.RUNNING
        b.save(claimed)
        again = a.claim()  # B "died": A finds t1 still running
        assert again is not None
        assert (again.id, again.status) == ("t1", TaskStatus.RUNNING)

    def test_a_fenced_replica_cannot_overwrite_the_new_runner(self, a: SharedTaskStore, b: SharedTaskStore) -> None:
        """Once B claimed a task A ran, A's late saves are ignored; a late running save never undoes a finish."""
        task = _task("t1")
        a.add(task, None)
        assert a.claim() is not None
        stale = a.get("t1")
        assert b.claim() is not None  # B takes it over
        assert stale is not None
        stale.status, stale.error = TaskStatus.FAILED, "late"
        a.save(stale)
        record = b.get("t1")
        assert record is not None
        assert (record.status, record.error) == (TaskStatus.QUEUED, None)
        record.status = TaskStatus.SUCCEEDED
        b.save(record)
        record.status = TaskStatus.RUNNING
        b.save(record)
        final = a.get("t1")
        assert final is not None
        assert final.status is TaskStatus.SUCCEEDED

    def test_key_mutex_serialises_submissions(self, a: SharedTaskStore, b: SharedTaskStore) -> None:
        """The submission mutex of one key is held by one replica at a time; other keys are free."""
        held = a.lock_key("key:x")
        other = b.lock_key("key:y")
        b.unlock_key(other, "key:y")
        conn = b.pool.getconn()
        try:
            row = conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", (0x0FAC, "default\nkey:x")).fetchone()
            assert row is not None
            assert row[0] is False
        finally:
            b.pool.putconn(conn)
        a.unlock_key(held, "key:x")


def test_public_api() -> None:
    """The module exports the shared task store."""
    assert mod.__all__ == ["SharedTaskStore"]
