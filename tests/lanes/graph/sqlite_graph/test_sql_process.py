"""The graph writer's SQL process: a real exec'd child storing batches in a real SQLite file."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import lanes.graph.sqlite_graph.sql_process as mod
from lanes.graph._extract.chunk_graph import chunk_extraction
from lanes.graph._extract.entities import Extraction, RuleExtractor
from lanes.graph.sqlite_graph.tables import GRAPH_TABLES, write_batch
from lanes.sqlite_common import chunk_row
from tests.lanes.graph._extract.test_pool import corpus
from tests.lanes.graph.sqlite_graph.test_writer_bulk import rows
from tests.support.processes import assert_gone, run_killed_parent

Part = Sequence[tuple[str, Extraction]]


def batch(start: int, n: int) -> tuple[list[tuple[Any, ...]], list[Part]]:
    """``n`` chunks' rows and their extractions in parts of 4."""
    docs = corpus(start + n)[start:]
    ex = RuleExtractor()
    extracted = [(c.id, chunk_extraction(c, ex, ex.aliases)) for c in docs]
    return [chunk_row(c) for c in docs], [extracted[i : i + 4] for i in range(0, n, 4)]


@pytest.fixture
def proc(tmp_path: Path) -> Iterator[mod.SqlProcess]:
    p = mod.SqlProcess(tmp_path / "graph.sqlite", GRAPH_TABLES)
    yield p
    p.close()


def in_thread(path: Path, batches: list[tuple[list[tuple[Any, ...]], list[Part]]]) -> dict[str, list[Any]]:
    with sqlite3.connect(path) as conn:
        conn.executescript(GRAPH_TABLES)
        for chunk_rows, parts in batches:
            write_batch(conn, chunk_rows, parts, False)
    conn.close()
    return rows(path)


def test_stores_what_the_thread_stores(tmp_path: Path, proc: mod.SqlProcess) -> None:
    """Two batches (the second re-writes two ids) give the rows of write_batch run here, ids included."""
    batches = [batch(0, 12), batch(10, 8)]
    for chunk_rows, parts in batches:
        sent: list[Part] = []
        assert proc.write(chunk_rows, False, iter(parts), sent) is False
        assert sent == parts
    proc.close()
    expected = in_thread(tmp_path / "here.sqlite", batches)
    assert rows(tmp_path / "graph.sqlite") == expected
    assert len(expected["chunks"]) == 18
    assert expected["mentions"]
    assert expected["relations"]


def test_a_deferred_load_reports_when_the_indexes_were_built(proc: mod.SqlProcess) -> None:
    """Deferred indexes stay deferred over new ids, and are built (False) when a batch re-writes a stored id."""
    chunk_rows, parts = batch(0, 8)
    assert proc.write(chunk_rows, True, iter(parts), []) is True
    chunk_rows, parts = batch(4, 8)
    assert proc.write(chunk_rows, True, iter(parts), []) is False


def test_a_failing_extraction_rolls_the_batch_back(tmp_path: Path, proc: mod.SqlProcess) -> None:
    """The parts' source raises mid-batch: nothing of the batch is stored, the error reaches the caller, and the
    process takes the next batch."""
    chunk_rows, parts = batch(0, 8)

    def failing() -> Iterator[Part]:
        yield parts[0]
        raise RuntimeError("extraction failed")

    with pytest.raises(RuntimeError, match="extraction failed"):
        proc.write(chunk_rows, False, failing(), [])
    assert rows(tmp_path / "graph.sqlite")["chunks"] == []
    proc.write(chunk_rows, False, iter(parts), [])
    assert len(rows(tmp_path / "graph.sqlite")["chunks"]) == 8


def test_failing_parts_and_a_dead_process_raise_the_parts_error(proc: mod.SqlProcess) -> None:
    """The parts fail and the process is gone too: the caller gets the parts' error (so it does not write the
    batch again from parts it no longer has), not SqlProcessFailed."""
    chunk_rows, parts = batch(0, 8)

    def failing() -> Iterator[Part]:
        yield parts[0]
        os.kill(proc.pid, signal.SIGKILL)
        proc._proc.wait()
        raise RuntimeError("extraction failed")

    with pytest.raises(RuntimeError, match="extraction failed"):
        proc.write(chunk_rows, False, failing(), [])


def test_a_failing_statement_is_raised_and_rolled_back(tmp_path: Path, proc: mod.SqlProcess) -> None:
    """A row SQLite refuses fails the batch in the child: the caller gets an sqlite3 error, nothing is stored."""
    chunk_rows, parts = batch(0, 8)
    with pytest.raises(sqlite3.OperationalError, match="graph SQL process"):
        proc.write([*chunk_rows, ("short row",)], False, iter(parts), [])
    assert rows(tmp_path / "graph.sqlite")["chunks"] == []
    proc.write(chunk_rows, False, iter(parts), [])
    assert len(rows(tmp_path / "graph.sqlite")["chunks"]) == 8


def test_a_dead_process_fails_the_write(proc: mod.SqlProcess) -> None:
    """Killed, the process fails the next write with SqlProcessFailed (the writer then falls back)."""
    os.kill(proc.pid, signal.SIGKILL)
    chunk_rows, parts = batch(0, 8)
    sent: list[Part] = []
    with pytest.raises(mod.SqlProcessFailed):
        proc.write(chunk_rows, False, iter(parts), sent)
    proc.close()
    with pytest.raises(mod.SqlProcessFailed, match="closed"):
        proc.write(chunk_rows, False, iter(parts), sent)


def test_close_waits_for_the_batch_in_flight(tmp_path: Path, proc: mod.SqlProcess) -> None:
    """close() while a batch's parts are still coming: the batch is committed first."""
    chunk_rows, parts = batch(0, 8)
    started = threading.Event()

    def slow() -> Iterator[Part]:
        started.set()
        for part in parts:
            time.sleep(0.2)
            yield part

    writer = threading.Thread(target=proc.write, args=(chunk_rows, False, slow(), []))
    writer.start()
    started.wait(5)
    proc.close()
    writer.join(5)
    assert len(rows(tmp_path / "graph.sqlite")["chunks"]) == 8


def test_the_process_exits_when_its_parent_is_killed(tmp_path: Path) -> None:
    """A parent killed with SIGKILL mid-batch: the child sees its stdin close, rolls back and exits."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from lanes.graph.sqlite_graph.sql_process import SqlProcess\n"
        "from lanes.graph.sqlite_graph.writer import GRAPH_TABLES\n"
        "from tests.lanes.graph.sqlite_graph.test_sql_process import batch\n"
        f"proc = SqlProcess(Path({str(tmp_path / 'graph.sqlite')!r}), GRAPH_TABLES)\n"
        "rows, parts = batch(0, 8)\n"
        "def parts_then_die():\n"
        "    yield parts[0]\n"
        "    print(proc.pid, flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "    yield parts[1]\n"
        "proc.write(rows, False, parts_then_die(), [])\n"
    )
    child = int(run_killed_parent(script).split()[0])
    assert_gone(child, "SQL process")
    assert rows(tmp_path / "graph.sqlite")["chunks"] == []  # the open batch was rolled back


def test_available_with_a_python_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests run under Python: available. Under a host binary (uWSGI's) the writer keeps the SQL in its thread."""
    assert mod.available() is True
    monkeypatch.setattr(mod.sys, "executable", "/usr/bin/uwsgi")
    assert mod.available() is False
