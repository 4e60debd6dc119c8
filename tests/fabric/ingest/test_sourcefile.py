"""Tests for fabric.ingest.sourcefile and the loaders over it: a FIFO, a socket or a device is refused, never opened
for a blocking read (each test runs its reader in a thread with a bounded join, so a missing fix fails instead of
hanging the suite)."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from fabric.core.errors import IngestError
from fabric.ingest import sourcefile
from fabric.ingest.loaders import detect_format, load_source
from fabric.ingest.sourcefile import check_source, open_source, read_source


@contextmanager
def fifo(path: Path) -> Iterator[Path]:
    """A real FIFO at ``path``; on exit a reader still blocked on it is released (a writer opens and closes it)."""
    os.mkfifo(path)
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):  # ENXIO when nobody is reading: nothing to release
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


def outcome(call: Callable[[], Any], pipe: Path) -> BaseException | Any:
    """What ``call()`` returned or raised, run in a thread; fails the test if it blocks (on ``pipe``)."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(call())
        except BaseException as exc:  # handed back to the test
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=30)
    if thread.is_alive():
        os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))  # release the blocked reader before failing
        thread.join(timeout=30)
        pytest.fail(f"reading {pipe} blocked: a FIFO was opened for reading")
    return box[0]


class TestCheckSource:
    def test_public_api(self) -> None:
        """The module's exports."""
        assert set(sourcefile.__all__) == {"check_source", "open_source", "read_source"}

    def test_regular_files_and_folders_pass(self, tmp_path: Path) -> None:
        """A folder and a regular file (also through a link) are sources."""
        (tmp_path / "a.md").write_text("# A\n")
        (tmp_path / "link.md").symlink_to(tmp_path / "a.md")
        for path in (tmp_path, tmp_path / "a.md", tmp_path / "link.md"):
            check_source(path)
        assert read_source(tmp_path / "link.md") == "# A\n"

    def test_fifo_socket_and_device_are_refused(self, tmp_path: Path) -> None:
        """A FIFO (and a link to one), a socket and a device are refused naming what they are."""
        with fifo(tmp_path / "pipe.jsonl") as pipe:
            (tmp_path / "to-pipe.jsonl").symlink_to(pipe)
            for path in (pipe, tmp_path / "to-pipe.jsonl"):
                with pytest.raises(IngestError, match="is a FIFO"):
                    check_source(path)
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(tmp_path / "s.jsonl"))
            with pytest.raises(IngestError, match="is a socket"):
                check_source(tmp_path / "s.jsonl")
        with pytest.raises(IngestError, match="is a character device"):
            check_source(Path("/dev/null"))

    def test_open_refuses_a_fifo_without_blocking(self, tmp_path: Path) -> None:
        """Opening a FIFO (a file swapped for one after the check) returns at once with the error: no writer needed."""
        with fifo(tmp_path / "pipe.md") as pipe:
            got = outcome(lambda: open_source(pipe), pipe)
        assert isinstance(got, IngestError)
        assert "is a FIFO" in str(got)


class TestLoaders:
    @pytest.mark.parametrize(("name", "fmt"), [("pipe.jsonl", "jsonl"), ("pipe.md", "markdown"), ("pipe", "beir")])
    def test_a_fifo_source_is_refused(self, tmp_path: Path, name: str, fmt: str) -> None:
        """load_source and detect_format refuse a FIFO in every format, naming it, and never block on it."""
        with fifo(tmp_path / name) as pipe:
            loaded = outcome(lambda: load_source(pipe, fmt), pipe)
            detected = outcome(lambda: detect_format(pipe), pipe)
        for got in (loaded, detected):
            assert isinstance(got, IngestError), got
            assert "is a FIFO" in str(got)

    def test_a_fifo_inside_a_folder_is_left_out(self, tmp_path: Path) -> None:
        """A folder's FIFO named like a note is not one of its files: the rest of the folder loads."""
        (tmp_path / "a.md").write_text("# A\n\nalpha\n")
        with fifo(tmp_path / "b.md") as pipe:
            got = outcome(lambda: load_source(tmp_path, "markdown"), pipe)
        assert not isinstance(got, BaseException), got
        assert [c.doc_id.rsplit(":", 1)[1] for c in got.chunks] == ["a.md"]
