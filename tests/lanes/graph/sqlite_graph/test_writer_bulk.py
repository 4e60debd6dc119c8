"""SqliteGraphWriter's bulk path: extraction in a worker process, prefetch, and indexes deferred on an empty store.

Every variant must store exactly the rows of the plain writer (thread extraction, indexes kept up to date)."""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import lanes.graph.sqlite_graph.writer as mod
from fabric.core.chunks import PrefetchingStore
from fabric.core.models import LaneKind, LaneRequest
from lanes.graph._extract.entities import Extraction
from lanes.graph._extract.pool import ExtractionPool
from lanes.graph.sqlite_graph.lane import SqliteGraphLane
from lanes.graph.sqlite_graph.sql_process import SqlProcessFailed
from tests.lanes.graph._extract.test_pool import corpus
from tests.support.embedded import chunk, resources, spec
from tests.support.logs import captured_events

_TABLES = ("chunks", "entities", "mentions", "relations")


def rows(path: Path) -> dict[str, list[Any]]:
    """Every row of the graph tables, sorted (ids included: they must be assigned alike)."""
    with sqlite3.connect(path) as conn:
        return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in _TABLES}


def indexes(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")} & set(
            mod.GRAPH_INDEXES
        )


def writer(home: Path, **options: Any) -> mod.SqliteGraphWriter:
    return mod.SqliteGraphWriter(spec(LaneKind.GRAPH, "sqlite_graph", **options), resources(home))


async def write(w: mod.SqliteGraphWriter, batches: list[list[Any]], *, prefetch: bool = False) -> None:
    await w.open()
    for i, batch in enumerate(batches):
        if prefetch and i + 1 < len(batches):
            w.prefetch(batches[i + 1])
        await w.upsert(batch)


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Send batches of 8+ chunks to the process (the default threshold is sized for real ingests)."""
    monkeypatch.setattr(mod, "POOL_MIN_BATCH", 8)


@pytest.fixture
def plain(tmp_path: Path) -> dict[str, list[Any]]:
    """The rows the plain writer stores for 200 chunks in batches of 70."""

    async def run() -> dict[str, list[Any]]:
        w = writer(tmp_path / "plain", extract_process=False)
        await w.upsert(corpus(5))  # not empty: the indexes are kept up to date from the start
        await w.delete([f"c{i}" for i in range(5)])
        docs = corpus(200)
        await write(w, [docs[i : i + 70] for i in range(0, 200, 70)])
        await w.aclose()
        return rows(tmp_path / "plain" / "graph.sqlite")

    return run  # type: ignore[return-value]


class TestSameRows:
    @pytest.mark.parametrize("prefetch", [False, True])
    async def test_process_and_deferred_indexes_store_the_plain_rows(
        self, tmp_path: Path, plain: Any, small_batches: None, prefetch: bool
    ) -> None:
        """Process extraction (with or without prefetch) into an empty store gives the plain writer's rows."""
        expected = await plain()
        w = writer(tmp_path / "bulk")
        docs = corpus(200)
        await write(w, [docs[i : i + 70] for i in range(0, 200, 70)], prefetch=prefetch)
        assert w._pool is not None  # the process did the extracting
        assert w._sql is not None  # and another one the SQL
        await w.aclose()
        assert rows(tmp_path / "bulk" / "graph.sqlite") == expected
        assert expected["relations"]
        assert expected["mentions"]

    async def test_a_prefetch_of_another_batch_is_dropped(
        self, tmp_path: Path, plain: Any, small_batches: None
    ) -> None:
        """The next upsert is not the prefetched batch: that work is cancelled and the batch extracted anew."""
        expected = await plain()
        w = writer(tmp_path / "bulk")
        docs = corpus(200)
        await w.open()
        w.prefetch(docs[100:170])
        for i in range(0, 200, 70):
            await w.upsert(docs[i : i + 70])
        await w.aclose()
        assert rows(tmp_path / "bulk" / "graph.sqlite") == expected

    async def test_a_dead_worker_falls_back_to_the_thread(
        self, tmp_path: Path, plain: Any, small_batches: None, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The worker killed mid-ingest: the writer logs it, extracts in its thread and stores the same rows."""
        expected = await plain()
        w = writer(tmp_path / "bulk")
        docs = corpus(200)
        await w.upsert(docs[:70])
        assert w._pool is not None
        for pid in list(w._pool._executor._processes):  # type: ignore[attr-defined]
            os.kill(pid, signal.SIGKILL)
        await w.upsert(docs[70:140])
        await w.upsert(docs[140:])
        assert w._pooled is False
        await w.aclose()
        assert rows(tmp_path / "bulk" / "graph.sqlite") == expected

    async def test_each_batch_is_extracted_once_with_prefetch(
        self, tmp_path: Path, small_batches: None, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The ingest names batch N+1 just before it writes batch N: the upsert of N takes N's prefetch (naming
        N+1 must not drop it), so the process extracts each batch once."""
        submitted: list[list[str]] = []
        submit = ExtractionPool.submit

        def counted(pool: ExtractionPool, chunks: Any) -> Any:
            submitted.append([c.id for c in chunks])
            return submit(pool, chunks)

        monkeypatch.setattr(ExtractionPool, "submit", counted)
        docs = corpus(200)
        batches = [docs[i : i + 70] for i in range(0, 200, 70)]
        w = writer(tmp_path)
        await w.open()
        w.prefetch(batches[0])
        await write(w, batches, prefetch=True)
        await w.aclose()
        assert submitted == [[c.id for c in b] for b in batches]

    async def test_a_sql_process_that_cannot_start_falls_back_to_the_thread(
        self, tmp_path: Path, plain: Any, small_batches: None, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The process cannot be started (its pipe broke at once): one warning, the SQL in the thread, same rows."""

        def broken(*_: Any) -> Any:
            raise SqlProcessFailed("graph SQL process 1: [Errno 32] Broken pipe")

        monkeypatch.setattr(mod, "SqlProcess", broken)
        expected = await plain()
        w = writer(tmp_path / "bulk")
        docs = corpus(200)
        with captured_events() as logs:
            await write(w, [docs[i : i + 70] for i in range(0, 200, 70)], prefetch=True)
        assert (w._pool is not None, w._sql, w._sql_on) == (True, None, False)
        assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["graph_sql_process_failed"]
        await w.aclose()
        assert rows(tmp_path / "bulk" / "graph.sqlite") == expected

    @pytest.mark.parametrize("why", ["option", "no interpreter"])
    async def test_sql_process_off_keeps_the_sql_in_the_thread(
        self, tmp_path: Path, plain: Any, small_batches: None, monkeypatch: pytest.MonkeyPatch, why: str
    ) -> None:
        """``sql_process = false``, or no Python to exec (an embedding host's binary): the extraction process still
        works, the statements run in the writer."""
        expected = await plain()
        if why == "no interpreter":
            monkeypatch.setattr(mod, "sql_available", lambda: False)
        w = writer(tmp_path / "bulk", **({"sql_process": False} if why == "option" else {}))
        docs = corpus(200)
        await write(w, [docs[i : i + 70] for i in range(0, 200, 70)], prefetch=True)
        assert w._pool is not None
        assert w._sql is None
        await w.aclose()
        assert rows(tmp_path / "bulk" / "graph.sqlite") == expected

    async def test_a_dead_sql_process_falls_back_to_the_thread(
        self, tmp_path: Path, plain: Any, small_batches: None
    ) -> None:
        """The SQL process killed mid-ingest: the writer logs it, runs the statements in its thread from then on
        and stores the same rows."""
        expected = await plain()
        w = writer(tmp_path / "bulk")
        docs = corpus(200)
        await w.upsert(docs[:70])
        assert w._sql is not None
        dead = w._sql.pid
        os.kill(dead, signal.SIGKILL)
        with captured_events() as logs:
            await w.upsert(docs[70:140])
            await w.upsert(docs[140:])
        assert w._sql is None
        assert w._sql_on is False
        assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["graph_sql_process_failed"]
        await w.aclose()
        assert rows(tmp_path / "bulk" / "graph.sqlite") == expected

    async def test_small_batches_and_own_extractors_stay_in_the_thread(self, tmp_path: Path) -> None:
        """Below POOL_MIN_BATCH, with ``extract_process = false``, or with an extractor passed in: no process."""

        class Upper:
            def extract(self, text: str) -> Extraction:
                return Extraction(entities={w.lower(): w for w in text.split() if w[:1].isupper()})

        docs = corpus(200)
        for w in (writer(tmp_path / "a"), writer(tmp_path / "b", extract_process=False)):
            await w.upsert(docs[:100])
            assert w._pool is None
            await w.aclose()
        own = mod.SqliteGraphWriter(spec(LaneKind.GRAPH, "sqlite_graph"), resources(tmp_path / "c"), Upper())
        await own.upsert(docs)
        assert own._pool is None
        await own.aclose()

    def test_is_a_prefetching_store(self, tmp_path: Path) -> None:
        """The ingest pipeline recognises the writer as one that can start the next batch early."""
        assert isinstance(writer(tmp_path), PrefetchingStore)


class TestDeferredIndexes:
    async def test_built_by_finish(self, tmp_path: Path) -> None:
        """An empty store is loaded without its secondary indexes; finish builds them and says so."""
        w = writer(tmp_path)
        await w.upsert(corpus(20))
        assert indexes(tmp_path / "graph.sqlite") == set()
        assert await w.finish() == {"indexed": True}
        assert indexes(tmp_path / "graph.sqlite") == set(mod.GRAPH_INDEXES)
        assert await w.finish() == {"indexed": False}
        await w.aclose()

    async def test_built_by_aclose_without_finish(self, tmp_path: Path) -> None:
        """A caller that only closes the writer (the service's ingest) still leaves the indexes."""
        w = writer(tmp_path)
        await w.upsert(corpus(20))
        await w.aclose()
        assert indexes(tmp_path / "graph.sqlite") == set(mod.GRAPH_INDEXES)

    async def test_a_store_with_data_keeps_them_up_to_date(self, tmp_path: Path) -> None:
        """Opening a store that holds chunks creates any missing index at once: nothing is deferred."""
        w = writer(tmp_path)
        await w.upsert(corpus(5))
        await w.aclose()
        with sqlite3.connect(tmp_path / "graph.sqlite") as conn:
            conn.execute("DROP INDEX relations_chunk")  # a store from before the index existed
        w = writer(tmp_path)
        await w.open()
        assert indexes(tmp_path / "graph.sqlite") == set(mod.GRAPH_INDEXES)
        assert await w.finish() == {"indexed": False}
        await w.aclose()

    async def test_rewriting_an_id_during_the_load_replaces_its_edges(self, tmp_path: Path) -> None:
        """An id written twice in one load: the indexes are built first, and the old mentions go."""
        w = writer(tmp_path)
        await w.upsert([chunk("x", "Marie Curie worked in Paris.")])
        await w.upsert([chunk("x", "Niels Bohr lectured in Copenhagen.")])
        assert indexes(tmp_path / "graph.sqlite") == set(mod.GRAPH_INDEXES)
        await w.aclose()
        with sqlite3.connect(tmp_path / "graph.sqlite") as conn:
            names = {r[0] for r in conn.execute("SELECT e.norm FROM mentions m JOIN entities e ON e.id = m.entity_id")}
        assert "niels bohr" in names
        assert "marie curie" not in names

    async def test_reading_triples_builds_them(self, tmp_path: Path) -> None:
        """The audit reads the triples by chunk id after the writes: the load is over, the indexes are built."""
        w = writer(tmp_path)
        await w.upsert([chunk("v", "Vitamin D reduces fracture risk in older adults.")])
        triples = await w.triples(["v"])
        assert ("vitamin d", "reduce", "fracture risk") in {(s.lower(), p, o.lower()) for s, p, o in triples["v"]}
        assert indexes(tmp_path / "graph.sqlite") == set(mod.GRAPH_INDEXES)
        assert await w.finish() == {"indexed": False}
        await w.aclose()

    async def test_delete_during_the_load_builds_them(self, tmp_path: Path) -> None:
        """A delete needs the chunk indexes: they are built before it runs."""
        w = writer(tmp_path)
        await w.upsert(corpus(10))
        await w.delete(["c1"])
        assert indexes(tmp_path / "graph.sqlite") == set(mod.GRAPH_INDEXES)
        await w.aclose()
        with sqlite3.connect(tmp_path / "graph.sqlite") as conn:
            assert conn.execute("SELECT COUNT(*) FROM mentions WHERE chunk_id = 'c1'").fetchone()[0] == 0

    async def test_the_lane_reads_a_store_mid_load(self, tmp_path: Path) -> None:
        """The lane opening the store during a bulk load creates the indexes and answers from what is written."""
        w = writer(tmp_path)
        await w.upsert([chunk("v", "Vitamin D reduces fracture risk in older adults.")])
        lane = SqliteGraphLane(spec(LaneKind.GRAPH, "sqlite_graph"), resources(tmp_path))
        hits = await lane.search(LaneRequest(query="Does vitamin D lower fracture risk?", top_k=5))
        assert [h.id for h in hits] == ["v"]
        assert indexes(tmp_path / "graph.sqlite") == set(mod.GRAPH_INDEXES)
        await w.upsert([chunk("w", "Calcium intake increased bone density.")])
        await w.aclose()
        lane.db.close()
