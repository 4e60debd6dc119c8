"""The SQLite graph writer's statements in a process of their own, beside the extraction process.

At 50K passages the graph store is the ingest's longest write: its SQL (entities, mentions and relations, about
2.5M rows) ran in the ingest's process, where each statement step gives the GIL back and then waits to take it
again from the FTS5 and vector writers and the pipeline; it ran about twice as long as alone (docs/lanes.md). In
a process of its own it has an interpreter to itself, and the extraction worker, the SQL and the other stores
spread over the cores.

The process is **exec'd** (``python -m lanes.graph.sqlite_graph.sql_process PATH``), never forked: a forked child that
opens
SQLite can wait forever on SQLite's memory mutex, held at the fork by one of the parent's store threads (seen:
a forked prototype hung at its first ``sqlite3.connect``). Exec'd, it also runs no ``__main__`` of the parent's
and inherits no descriptor but its pipes (the home lock stays the parent's).

Protocol: pickles over the child's stdin and stdout, one batch at a time:

- ``("begin", rows, deferred)``, then ``("part", [(chunk_id, entities, relations), ...])`` as each part of the
  batch is extracted, then ``("commit",)`` or ``("abort",)``;
- one answer per batch: ``("ok", deferred)`` (the batch is committed; whether the indexes still wait) or
  ``("error", message)`` (rolled back).

The child runs :func:`lanes.graph.sqlite_graph.writer.write_batch`, the same function the writer's thread runs, so the
stored rows are the same either way (the tests compare them, ids included). When its stdin closes (the parent
exits or is killed) it exits; an open transaction is rolled back by SQLite.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from lanes.graph._extract.entities import Extraction

__all__ = ["CLOSE_S", "SqlProcess", "SqlProcessFailed", "available", "main"]

CLOSE_S = 30.0
"""How long :meth:`SqlProcess.close` waits for the process to exit before killing it."""

_Part = Sequence[tuple[str, Extraction]]


def available() -> bool:
    """Whether this process can exec a Python interpreter: ``sys.executable`` is one (an embedding host such as
    uWSGI sets it to its own binary, which ``-m`` would not run as a module)."""
    return Path(sys.executable).name.lower().startswith("python")


class SqlProcessFailed(Exception):
    """The process died, or could not be reached: the batch was not stored by it (or was, if it died after its
    commit; either way the caller can write the batch again, since every row is an upsert)."""


class SqlProcess:
    """One exec'd process storing a graph writer's batches (see the module docstring).

    Args:
        path: the graph database.
        schema: the tables to create if missing.
    """

    def __init__(self, path: Path, schema: str) -> None:
        root = str(Path(__file__).resolve().parents[3])  # where ``lanes`` is importable from
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "lanes.graph.sqlite_graph.sql_process", str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self._lock = threading.Lock()
        self._closed = False
        try:
            self._send(("schema", schema))
        except SqlProcessFailed:
            self.close()
            raise

    @property
    def pid(self) -> int:
        """The process id."""
        return self._proc.pid

    def _send(self, message: tuple[Any, ...]) -> None:
        stdin = self._proc.stdin
        assert stdin is not None
        try:
            pickle.dump(message, stdin, protocol=pickle.HIGHEST_PROTOCOL)
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as exc:
            raise SqlProcessFailed(f"graph SQL process {self._proc.pid}: {exc}") from exc

    def _answer(self) -> tuple[Any, ...]:
        stdout = self._proc.stdout
        assert stdout is not None
        try:
            answer: tuple[Any, ...] = pickle.load(stdout)
        except (EOFError, OSError, pickle.UnpicklingError, ValueError) as exc:
            code = self._proc.poll()
            raise SqlProcessFailed(f"graph SQL process {self._proc.pid} ended (exit code {code}): {exc!r}") from exc
        return answer

    def write(
        self,
        rows: Sequence[tuple[Any, ...]],
        deferred: bool,
        parts: Iterable[_Part],
        sent: list[_Part],
    ) -> bool:
        """Store one batch (blocking): ``rows`` and each part of ``parts`` as it comes, each appended to ``sent``
        once taken. Returns whether the indexes still wait.

        Raises:
            SqlProcessFailed: the process died or was closed.
            sqlite3.Error: the batch failed in the process (rolled back there).
            Exception: whatever ``parts`` raised (the batch is rolled back there first).
        """
        with self._lock:
            if self._closed:
                raise SqlProcessFailed("graph SQL process closed")
            self._send(("begin", list(rows), deferred))
            try:
                for part in parts:
                    sent.append(part)
                    self._send(("part", [(chunk_id, ex.entities, ex.relations) for chunk_id, ex in part]))
            except SqlProcessFailed:
                raise
            except BaseException:  # the parts failed: roll back there; their error, not a dead process, is raised
                with contextlib.suppress(SqlProcessFailed):
                    self._send(("abort",))
                    self._answer()
                raise
            self._send(("commit",))
            answer = self._answer()
        if answer[0] == "ok":
            return bool(answer[1])
        raise sqlite3.OperationalError(f"graph SQL process: {answer[1]}")

    def close(self) -> None:
        """Wait for the batch in flight, then for the process to exit (killed after :data:`CLOSE_S`)."""
        with self._lock:
            self._closed = True
            try:
                if self._proc.stdin is not None:
                    self._proc.stdin.close()
            except OSError:
                pass  # already gone
            try:
                self._proc.wait(timeout=CLOSE_S)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            if self._proc.stdout is not None:
                self._proc.stdout.close()


class _Abort(Exception):
    """The parent gave the batch up."""


def _parts(inp: IO[bytes]) -> Iterator[list[tuple[str, Extraction]]]:
    while True:
        message = pickle.load(inp)
        if message[0] == "part":
            yield [(c, Extraction(entities=e, relations=r)) for c, e, r in message[1]]
        elif message[0] == "commit":
            return
        else:
            raise _Abort


def _store(
    conn: sqlite3.Connection, *, rows: Sequence[tuple[Any, ...]], parts: Iterable[_Part], deferred: bool
) -> bool:
    from lanes.graph.sqlite_graph.tables import write_batch

    return write_batch(conn, rows, parts, deferred)


def main(argv: Sequence[str] | None = None) -> int:
    """The child: store the batches read from stdin until it closes."""
    from lanes.sqlite_common import SqliteDb

    args = list(sys.argv[1:] if argv is None else argv)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever prints goes to stderr: stdout carries the answers only
    inp = sys.stdin.buffer
    try:
        _, schema = pickle.load(inp)
    except EOFError:
        return 0
    db = SqliteDb(Path(args[0]), schema)
    while True:
        try:
            message = pickle.load(inp)
        except EOFError:
            break
        _, rows, deferred = message
        parts = _parts(inp)
        try:
            answer: tuple[Any, ...] = (
                "ok",
                db.call(functools.partial(_store, rows=rows, parts=parts, deferred=deferred)),
            )
        except _Abort:
            answer = ("aborted",)
        except EOFError:
            break  # the parent is gone mid-batch: rolled back
        except Exception as exc:  # a failed statement: rolled back; the parent raises it
            try:
                for _ in parts:  # read the batch's remaining parts up to its end
                    pass
            except _Abort:
                pass
            answer = ("error", f"{type(exc).__name__}: {exc}")
        pickle.dump(answer, out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()
    db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
