"""An exclusive advisory lock on one file (``flock``), held by an open descriptor: the kernel drops it when the
process dies, so a crashed holder never leaves a stale lock behind."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

__all__ = ["FileLock"]


class FileLock:
    """An exclusive ``flock`` on one file, held by an open descriptor (the kernel drops it when the process dies)."""

    __slots__ = ("fd", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def take(self, *, wait: bool) -> bool:
        """Take the lock (waiting for it when ``wait``); False when another descriptor holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        return True

    def release(self) -> None:
        """Drop the lock (closing the descriptor releases it)."""
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)
