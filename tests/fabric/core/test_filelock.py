"""The advisory file lock: one holder at a time, released with its descriptor."""

from __future__ import annotations

from pathlib import Path

from fabric.core.filelock import FileLock


def test_one_holder_at_a_time(tmp_path: Path) -> None:
    """A second descriptor cannot take a held lock without waiting; after the release it can."""
    path = tmp_path / "x.lock"
    first, second = FileLock(path), FileLock(path)
    assert first.take(wait=False)
    assert not second.take(wait=False)
    assert second.fd is None
    first.release()
    assert first.fd is None
    assert second.take(wait=True)
    second.release()


def test_release_is_idempotent(tmp_path: Path) -> None:
    """Releasing a lock that is not held does nothing."""
    lock = FileLock(tmp_path / "y.lock")
    lock.release()
    assert lock.take(wait=False)
    lock.release()
    lock.release()
    assert lock.fd is None
