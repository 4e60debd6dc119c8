"""The durable task store on a real SQLite file: records round-trip, keys per tenant, bodies kept only while a task
needs them, bounded history, and everything read back by a second connection (a restarted process)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

import fabric.serve.tasks.store as mod
from fabric.serve.tasks.store import TASKS_FILE, IngestTask, StageProgress, TaskStatus, TaskStore
from fabric.serve.tasks.submission import parse_submission
from fabric.settings import IngestConfig


def _task(tid: str, home: Path, *, tenant: str = "default", key: str = "key:k") -> IngestTask:
    sub = parse_submission({"entries": [{"id": tid, "text": "t"}]}, IngestConfig(), None)
    return IngestTask(
        id=tid, key=key, submission=replace(sub, entries=()), source_path=home / "spool" / tid / "api.jsonl",
        tenant=tenant,
    )  # fmt: skip


@pytest.fixture
def store(tmp_path: Path) -> Iterator[TaskStore]:
    s = TaskStore(tmp_path / TASKS_FILE)
    yield s
    s.close()


class TestRecords:
    def test_a_record_round_trips_through_another_connection(self, store: TaskStore, tmp_path: Path) -> None:
        """Every field written is what a new process reads back (the API record is identical)."""
        task = _task("t1", tmp_path)
        store.add(task, b"{}\n")
        task.status, task.attempts = TaskStatus.FAILED, 2
        task.started_at = task.finished_at = datetime(2026, 1, 2, tzinfo=UTC)
        task.progress["embed"] = StageProgress(done=3, total=5)
        task.report, task.error, task.conflicts = {"docs": 1}, "boom", {"x": "api"}
        store.save(task)
        again = TaskStore(tmp_path / TASKS_FILE)
        found = again.get("t1")
        again.close()
        assert found is not None
        assert found.to_dict() == task.to_dict()
        assert found.tenant == "default"
        assert found.done.is_set()

    def test_unknown_id(self, store: TaskStore) -> None:
        """An id never recorded is None."""
        assert store.get("nope") is None

    def test_keys_are_per_tenant(self, store: TaskStore, tmp_path: Path) -> None:
        """One idempotency key names a different task in each tenant."""
        store.add(_task("a", tmp_path, tenant="acme"), None)
        store.add(_task("b", tmp_path, tenant="globex"), None)
        found_a, found_b = store.by_key("acme", "key:k"), store.by_key("globex", "key:k")
        assert (found_a and found_a.id, found_b and found_b.id) == ("a", "b")
        assert store.by_key("default", "key:k") is None

    def test_unfinished_in_queue_order(self, store: TaskStore, tmp_path: Path) -> None:
        """Queued and running tasks come back in submission order; finished ones do not."""
        for tid in ("q1", "q2", "q3"):
            store.add(_task(tid, tmp_path, key=f"key:{tid}"), None)
        done = _task("q2", tmp_path, key="key:q2")
        done.status = TaskStatus.SUCCEEDED
        store.save(done)
        assert [t.id for t in store.unfinished()] == ["q1", "q3"]
        assert store.counts() == {"queued": 2, "running": 0, "succeeded": 1, "failed": 0}


class TestBodies:
    def test_body_is_kept_until_no_unfinished_task_needs_it(self, store: TaskStore, tmp_path: Path) -> None:
        """Two tasks sharing a spool file: the body goes only when the second finishes."""
        first, second = _task("s1", tmp_path, key="key:1"), _task("s2", tmp_path, key="key:2")
        second.source_path = first.source_path
        store.add(first, b"body\n")
        store.add(second, b"body\n")
        first.status = TaskStatus.SUCCEEDED
        store.save(first)
        assert store.body(first.source_path) == b"body\n"
        assert store.spooled() == {str(first.source_path)}
        second.status = TaskStatus.FAILED
        store.save(second)
        assert store.body(first.source_path) is None
        assert store.spooled() == set()


class TestHistory:
    def test_evict_keeps_the_newest_finished_and_every_unfinished(self, store: TaskStore, tmp_path: Path) -> None:
        """Beyond ``keep`` the oldest finished records (and their keys) go; queued ones stay."""
        store.add(_task("live", tmp_path, key="key:live"), None)
        for i in range(4):
            task = _task(f"f{i}", tmp_path, key=f"key:f{i}")
            store.add(task, None)
            task.status, task.finished_at = TaskStatus.SUCCEEDED, datetime(2026, 1, 1 + i, tzinfo=UTC)
            store.save(task)
        assert store.evict(2) == 2
        assert [store.get(f"f{i}") is not None for i in range(4)] == [False, False, True, True]
        assert store.by_key("default", "key:f0") is None
        assert store.get("live") is not None


def test_public_api() -> None:
    """The module exports the store, the task record types and its constants."""
    assert set(mod.__all__) == {
        "COLUMNS", "DEFAULT_TENANT", "STAGES", "TASKS_FILE", "IngestTask", "StageProgress", "TaskBackend", "TaskStatus",
        "TaskStore", "row_task", "task_row",
    }  # fmt: skip
