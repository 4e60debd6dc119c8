"""The replicas' state on one host (SQLite files and file locks): its URL, its rate buckets, its secret and its
locks, the writer lock held across real processes. The task queue's behaviour with two replicas is tested with
both backends in ``tests/fabric/serve/tasks/test_shared.py``, the service's in
``tests/fabric/serve/test_replicas.py``."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import fabric.serve.state.local as mod
from fabric.core.errors import ConfigError
from fabric.core.filelock import FileLock
from fabric.serve.state.local import LocalBuckets, LocalState, local_folder, local_url


class TestUrl:
    def test_a_sqlite_url_names_its_folder(self, tmp_path: Path) -> None:
        assert local_folder(local_url(tmp_path)) == tmp_path.resolve()
        assert local_folder("sqlite:///srv/fabric%20state") == Path("/srv/fabric state")

    def test_other_schemes_are_not_local(self) -> None:
        assert local_folder("postgresql://db/fabric") is None

    @pytest.mark.parametrize("url", ["sqlite://relative/folder", "sqlite:///", "sqlite:relative"])
    def test_a_folder_must_be_absolute(self, url: str) -> None:
        with pytest.raises(ConfigError, match="sqlite:///<absolute folder>"):
            local_folder(url)

    def test_an_unusable_folder_is_a_clear_error(self, tmp_path: Path) -> None:
        (tmp_path / "file").write_text("not a folder")
        with pytest.raises(ConfigError, match="unusable"):
            LocalState(tmp_path / "file" / "state").open_sync()


class TestBuckets:
    def test_a_burst_is_shared_by_two_handles(self, tmp_path: Path) -> None:
        """Two replicas' handles on one folder draw from one bucket: 10 tokens in all, then the wait until one."""
        now = [1000.0]
        a, b = (LocalBuckets(tmp_path, clock=lambda: now[0]) for _ in range(2))
        waits = [x.take_sync("tenant:acme", 2.0, 10) for _ in range(8) for x in (a, b)]
        assert waits.count(0.0) == 10
        assert all(w == pytest.approx(0.5) for w in waits if w)
        now[0] += 1.0  # two tokens come back
        assert [a.take_sync("tenant:acme", 2.0, 10), b.take_sync("tenant:acme", 2.0, 10)] == [0.0, 0.0]
        assert a.take_sync("tenant:acme", 2.0, 10) > 0.0
        assert b.take_sync("tenant:other", 2.0, 10) == 0.0  # per name
        a.close()
        b.close()

    async def test_take_is_awaitable(self, tmp_path: Path) -> None:
        buckets = LocalBuckets(tmp_path)
        assert await buckets.take("tenant:x", 1.0, 1) == 0.0
        assert await buckets.take("tenant:x", 1.0, 1) > 0.0
        buckets.close()

    def test_a_locked_file_grants_and_logs(self, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
        """Another process inside a transaction past the timeout: the request is let through, not failed."""
        buckets = LocalBuckets(tmp_path, timeout_s=0.05)
        assert buckets.take_sync("tenant:x", 1.0, 1) == 0.0
        holder = sqlite3.connect(tmp_path / "buckets.sqlite", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            assert buckets.take_sync("tenant:x", 1.0, 1) == 0.0  # empty bucket, but the file is locked: granted
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert buckets.take_sync("tenant:x", 1.0, 1) > 0.0  # the bucket was left as it was
        buckets.close()


class TestState:
    async def test_one_secret_per_name_for_every_handle(self, tmp_path: Path) -> None:
        states = [LocalState(tmp_path) for _ in range(2)]
        for s in states:
            await s.open()
        got = await asyncio.gather(*(s.secret("cursor:default") for s in states for _ in range(3)))
        assert len(set(got)) == 1
        assert len(got[0]) == 64
        assert await states[0].secret("cursor:acme") != got[0]

    def test_lock_files_do_not_name_the_tenant(self, tmp_path: Path) -> None:
        state = LocalState(tmp_path)
        path = state.lock_path("writer", "acme/../../etc")
        assert path.parent == state.locks
        assert "acme" not in path.name

    def test_submission_locks_use_a_bounded_set_of_files(self, tmp_path: Path) -> None:
        """Many idempotency keys share at most SUBMIT_SLOTS lock files per tenant; one key's lock excludes a
        second taker of the same key until released."""
        state = LocalState(tmp_path)
        state.open_sync()
        a, b = state.task_store("acme", "a"), state.task_store("acme", "b")
        for i in range(500):
            a.unlock_key(a.lock_key(f"key:{i}"), f"key:{i}")
        assert len(list(state.locks.glob("submit-*.lock"))) <= mod.SUBMIT_SLOTS
        held = a.lock_key("key:same")
        probe = FileLock(held.path)
        assert not probe.take(wait=False)
        a.unlock_key(held, "key:same")
        assert probe.take(wait=False)
        probe.release()
        b.close()

    def test_the_writer_lock_excludes_other_holders_and_is_not_reentrant(self, tmp_path: Path) -> None:
        state = LocalState(tmp_path)
        state.open_sync()
        a, b = state.task_store("acme", "a"), state.task_store("acme", "b")
        assert a.try_writer()
        assert a.writer_alive()
        assert not a.try_writer()  # not re-entrant
        assert not b.try_writer()  # held elsewhere (another descriptor)
        assert state.task_store("other", "b").try_writer()  # per tenant
        a.release_writer()
        assert not a.writer_alive()
        assert b.try_writer()
        b.close()

    def test_the_writer_lock_dies_with_its_process(self, tmp_path: Path) -> None:
        """A process holding the lock killed with SIGKILL: the kernel drops it, and this process can take it."""
        state = LocalState(tmp_path)
        state.open_sync()
        child = textwrap.dedent(
            f"""
            import sys, time
            from pathlib import Path
            from fabric.serve.state.local import LocalState
            store = LocalState(Path({str(tmp_path)!r})).task_store("acme", "child")
            assert store.try_writer()
            print("held", flush=True)
            time.sleep(600)
            """
        )
        proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "held"
            mine = state.task_store("acme", "parent")
            assert not mine.try_writer()
            proc.kill()
            proc.wait(timeout=30)
            assert mine.try_writer()
            mine.close()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def test_public_api() -> None:
    assert set(mod.__all__) == {
        "LOCAL_SCHEME",
        "SUBMIT_SLOTS",
        "LocalBuckets",
        "LocalState",
        "LocalTaskStore",
        "local_folder",
        "local_url",
    }
