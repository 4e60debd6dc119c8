"""Opening an ingest source: regular files only, never a FIFO, a socket or a device.

Opening a FIFO for reading blocks until a writer opens it, and reading a device (``/dev/zero``, a terminal) may never
end: an ingest path naming one would hang ``fabric ingest``, or the tenant's task queue behind an HTTP ingest, for
good. So every path ingest reads is checked twice:

- :func:`check_source` before anything is opened (``os.stat``, which never opens the file): the path must be a
  folder or a regular file (links followed), else :class:`~fabric.core.errors.IngestError` naming what it is;
- :func:`open_source` opens with ``O_NONBLOCK`` (opening a FIFO then returns at once instead of waiting for a writer)
  and checks the opened descriptor with ``fstat``, so a file swapped for a FIFO between the check and the open is
  refused too, without a read.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

from fabric.core.errors import IngestError

__all__ = ["check_source", "open_source", "read_source"]

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))  # fmt: skip


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_source(path: Path) -> None:
    """Refuse ``path`` unless it is a folder or a regular file (symbolic links followed); never opens it.

    Raises:
        IngestError: the path is missing, or is a FIFO, a socket or a device (named).
    """
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise IngestError(f"path: {path} cannot be read: {exc.strerror or exc}") from None
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        raise IngestError(f"path: {path} is {_kind(mode)}; ingest reads regular files and folders only")


def open_source(path: Path) -> io.TextIOWrapper:
    """``path`` opened for reading as UTF-8 text, refused unless it is a regular file (see the module docstring).

    Raises:
        IngestError: not a regular file (named), or it cannot be opened.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise IngestError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise IngestError(f"path: {path} is {_kind(mode)}; ingest reads regular files and folders only")
        os.set_blocking(fd, True)
        return open(fd, encoding="utf-8")  # the caller closes it
    except BaseException:
        os.close(fd)
        raise


def read_source(path: Path) -> str:
    """The whole text of the regular file ``path`` (:func:`open_source`).

    Raises:
        IngestError: not a regular file, unreadable, or not UTF-8.
    """
    with open_source(path) as fh:
        try:
            return fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise IngestError(f"{path}: cannot read: {exc}") from None
