"""The graph writer's extraction process: a real forked worker gives exactly the in-thread extractions."""

from __future__ import annotations

import gc
import os
import signal
import sqlite3
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

import lanes.graph._extract.pool as mod
from fabric.core.chunks import Chunk
from lanes.graph._extract.chunk_graph import chunk_extraction
from lanes.graph._extract.entities import RuleExtractor
from tests.support.embedded import chunk
from tests.support.processes import assert_gone, run_killed_parent

_NAMES = ["Vitamin D", "IL-6", "Marie Curie", "p53", "Reciprocal Rank Fusion", "U.S.", "BRCA1", "Paris"]
_VERBS = ["reduces", "is inhibited by", "increased", "leads to", "is associated with", "does not affect"]


def corpus(n: int) -> list[Chunk]:
    """``n`` deterministic chunks with named entities, verb patterns, bigrams and, for some, supplied triples."""
    out = []
    for i in range(n):
        a, b, c = _NAMES[i % 8], _NAMES[(i * 3 + 1) % 8], _NAMES[(i * 5 + 2) % 8]
        text = (
            f"{a} {_VERBS[i % 6]} {b} in older adults. Chronic inflammation markers rose after {c} exposure. "
            f"Study {i} measured bone density and fracture risk."
        )
        meta = {"triples": [[a, "studied_in", f"Trial {i % 5}"]]} if i % 4 == 0 else {}
        out.append(chunk(f"c{i}", text, title=f"Report {i % 7} on {a}", metadata=meta))
    return out


def test_records_carry_what_extraction_reads() -> None:
    """Title, text and the supplied triples travel; nothing else of the chunk does."""
    record = mod.chunk_record(corpus(1)[0])
    assert set(record) == {"title", "text", "metadata"}
    assert record["metadata"] == {"triples": [["Vitamin D", "studied_in", "Trial 0"]]}


class _Marker:
    """Writes the pid of the process that finalises it (a cycle: only the collector frees it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.me = self
        self.conn = sqlite3.connect(":memory:")  # what hung the child: finalising an inherited connection

    def __del__(self) -> None:
        with self.path.open("a") as fh:
            fh.write(f"{os.getpid()}\n")


def test_the_child_never_collects_what_it_inherited(tmp_path: Path) -> None:
    """Garbage the parent holds at the fork is not finalised in the worker, whose collector still runs (an
    inherited SQLite connection's finaliser could wait forever on a mutex held by another parent thread)."""
    marks = tmp_path / "finalised"
    was = gc.isenabled()
    gc.disable()  # keep the cycle alive until the fork
    try:
        _Marker(marks)
        pool = mod.ExtractionPool({})
        try:
            assert pool.submit(corpus(2))[0].result()
            assert not gc.isenabled()  # the guard restores the parent's state
            child = pool._executor.submit(os.getpid).result()
            assert pool._executor.submit(gc.isenabled).result() is True
            assert pool._executor.submit(gc.collect).result() >= 0
        finally:
            pool.close()
        assert not marks.exists()
        gc.collect()
    finally:
        if was:
            gc.enable()
    assert marks.read_text().split() == [str(os.getpid())]
    assert child != os.getpid()


def test_the_process_extracts_what_the_thread_does() -> None:
    """Every part's extractions equal :func:`chunk_extraction` run here, in chunk order, aliases applied."""
    aliases = {"u.s.": "united states", "il-6": "interleukin 6"}
    chunks = corpus(150)
    pool = mod.ExtractionPool(aliases)
    try:
        parts = pool.submit(chunks)
        got = [ex for part in parts for ex in part.result()]
    finally:
        pool.close()
    here = RuleExtractor(aliases)
    assert len(parts) == 3  # 150 chunks in parts of 64
    assert got == [chunk_extraction(c, here, aliases) for c in chunks]
    assert any("united states" in ex.entities for ex in got)
    assert any(t[1] == "studied_in" for ex in got for t in ex.relations)


def extract_all(pool: mod.ExtractionPool, chunks: list[Chunk]) -> list[object]:
    return [ex for part in pool.submit(chunks) for ex in part.result()]


def test_a_dead_worker_breaks_the_pool() -> None:
    """A killed worker surfaces as BrokenProcessPool (the writer then extracts in its thread)."""
    pool = mod.ExtractionPool({})
    try:
        pool.submit(corpus(2))[0].result()
        for pid in list(pool._executor._processes):  # type: ignore[attr-defined]
            os.kill(pid, signal.SIGKILL)
        with pytest.raises(BrokenProcessPool):
            extract_all(pool, corpus(2))
    finally:
        pool.close()


def test_available_here() -> None:
    """This platform forks (Linux): the writer uses the process."""
    assert mod.available() is True


def test_the_worker_exits_when_its_parent_is_killed(tmp_path: Path) -> None:
    """A parent killed with SIGKILL (a crash point) leaves no orphan worker holding its pipes and its lock file."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import os, signal, sys\n"
        "from lanes.graph._extract.pool import ExtractionPool\n"
        "from tests.lanes.graph._extract.test_pool import corpus\n"
        "pool = ExtractionPool({})\n"
        "pool.submit(corpus(4))[0].result()\n"
        "print(*pool._executor._processes, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    (worker,) = (int(p) for p in run_killed_parent(script).split())
    assert_gone(worker, "worker")  # the worker checks every WATCH_S (0.2 s)
