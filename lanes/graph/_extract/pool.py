"""Entity extraction beside the graph writer, in one worker process.

The rule extractor is pure Python: run in the writer's thread it holds the GIL, and it then slows every other
store written in the same process (SQLite gives the GIL back around each statement step and waits to get it back;
measured at 50K passages, the FTS5 writer took 17.3 s beside the graph writer against 5.0 s alone). In a process
of its own it runs on the second core while the SQLite statements run on the first.

:class:`ExtractionPool` owns that process. It is forked, not spawned: ``spawn`` and ``forkserver`` re-run the
parent's ``__main__`` in the child, so a script that embeds the engine without an ``if __name__ == "__main__"``
guard would run again (ingest again) inside it. Forking a process that has threads is safe for what the child does
here, pure Python over modules the parent has imported already, with one exception: the garbage collector. A
collection in the child may finalise a cycle inherited from the parent that holds an SQLite connection, and
``sqlite3_finalize`` then waits on SQLite's memory mutex, which a writer thread of the parent may have held at the
fork: the child hung for good, once, at the first part of a SciFact ingest. So the parent forks with its collector
off (:func:`_fork_guard`) and the child freezes every inherited object (:func:`gc.freeze`) before it turns its
own collector on: it collects only what it allocates itself.

The child also inherits the parent's descriptors (the home lock's file among them), so it exits as soon as its
parent is gone (:func:`_watch`), and the writer shuts it down before the ingest lets the lock go. Where ``fork``
does not exist, :func:`available` is False and the writer extracts in its thread.

The child holds its own :class:`~lanes.graph._extract.entities.RuleExtractor`, built once from the alias table and kept
with
its caches. Chunks travel as plain records (title, text, the supplied triples), and extractions travel back as
plain tuples. The results are exactly those of :func:`~lanes.graph._extract.chunk_graph.chunk_extraction` run in the
writer
(the tests compare both).

Only the default extractor goes to the process. An extractor passed in by code (a model wrapper, a test double) may
not pickle, and it stays in the writer's thread.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import threading
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager, nullcontext
from typing import Any

from fabric.core.chunks import Chunk
from lanes.graph._extract.chunk_graph import chunk_extraction
from lanes.graph._extract.entities import Extraction, RuleExtractor

__all__ = ["PART", "WATCH_S", "ExtractionPool", "Part", "available", "chunk_record"]

PART = 64
"""Chunks per task: the writer stores one part while the process extracts the next."""

WATCH_S = 0.2
"""How often the worker checks that its parent is alive."""

_worker: RuleExtractor | None = None  # the worker process's extractor (set by its initializer)


def available() -> bool:
    """Whether this platform can fork the worker process."""
    return "fork" in multiprocessing.get_all_start_methods()


def chunk_record(chunk: Chunk) -> dict[str, Any]:
    """What extraction reads of ``chunk``, as a picklable record."""
    triples = chunk.metadata.get("triples")
    return {"title": chunk.title, "text": chunk.text, "metadata": {"triples": triples} if triples else {}}


_FORKING = threading.Lock()


@contextmanager
def _fork_guard() -> Iterator[None]:
    """The collector off while the worker is forked: the child must not collect before :func:`_start` has frozen
    what it inherited (see the module docstring)."""
    with _FORKING:
        enabled = gc.isenabled()
        gc.disable()
        try:
            yield
        finally:
            if enabled:
                gc.enable()


def _start(aliases: Mapping[str, str], max_entities: int, parent: int) -> None:
    global _worker
    gc.freeze()  # the parent's objects, inherited: never collected here (see the module docstring)
    gc.enable()
    _worker = RuleExtractor(aliases, max_entities=max_entities)
    threading.Thread(target=_watch, args=(parent,), name="fabric-extract-watch", daemon=True).start()


def _watch(parent: int) -> None:
    """Exit when the parent is gone (killed: ``kill -9``, a crash point). A forked worker holds copies of the
    parent's descriptors: its stdout and stderr pipes, and the home lock's file, whose ``flock`` the kernel would
    otherwise keep for as long as the orphan lives (and the worker would wait for work forever)."""
    while os.getppid() == parent:
        time.sleep(WATCH_S)
    os._exit(0)


_Plain = tuple[dict[str, str], list[tuple[str, str, str]]]


def _extract(records: Sequence[Mapping[str, Any]]) -> list[_Plain]:
    """Extractions as plain tuples: a frozen dataclass unpickles through ``fields()``, in the parent's result
    thread and holding its GIL (0.35 s of that thread's 2.7 s at 50K passages, py-spy)."""
    assert _worker is not None, "the pool's initializer did not run"
    return [(ex.entities, ex.relations) for ex in (chunk_extraction(r, _worker, _worker.aliases) for r in records)]


class Part:
    """The extractions of one part of a batch, in flight."""

    def __init__(self, future: Future[list[_Plain]]) -> None:
        self._future = future

    def result(self) -> list[Extraction]:
        """The part's extractions, in chunk order (waits for them).

        Raises:
            concurrent.futures.process.BrokenProcessPool: the worker process died.
        """
        return [Extraction(entities=e, relations=r) for e, r in self._future.result()]

    def cancel(self) -> None:
        """Drop the part if the worker has not started it."""
        self._future.cancel()


class ExtractionPool:
    """One worker process extracting parts of a batch for one graph writer (see the module docstring)."""

    def __init__(self, aliases: Mapping[str, str], *, max_entities: int = 64) -> None:
        self._forked = False
        self._executor = ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("fork"),
            initializer=_start,
            initargs=(dict(aliases), max_entities, os.getpid()),
        )

    def submit(self, chunks: Sequence[Chunk]) -> list[Part]:
        """One :class:`Part` per :data:`PART` chunks of ``chunks``, in order."""
        # The first submit forks the worker (ProcessPoolExecutor starts its processes then, under "fork").
        guard = nullcontext() if self._forked else _fork_guard()
        self._forked = True
        with warnings.catch_warnings(), guard:  # Python 3.12+ warns when a process with threads forks (docstring)
            warnings.filterwarnings("ignore", r".*multi-threaded.*fork", DeprecationWarning)
            return [
                Part(self._executor.submit(_extract, [chunk_record(c) for c in chunks[i : i + PART]]))
                for i in range(0, len(chunks), PART)
            ]

    def close(self) -> None:
        """Stop the worker process (pending parts are cancelled)."""
        self._executor.shutdown(wait=True, cancel_futures=True)
