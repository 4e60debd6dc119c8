"""Tests of the ingestion pipeline: idempotency, updates, removals, interrupted-run repair, fail-open embeddings."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from fabric.core.chunks import Chunk, StoreWriter
from fabric.core.errors import LaneUnavailable
from fabric.core.models import LaneKind
from fabric.ingest.conflicts import IdConflictError
from fabric.ingest.deletion import delete_entries
from fabric.ingest.ledger import Ledger
from fabric.ingest.pipeline import ingest
from lanes.graph.sqlite_graph.writer import SqliteGraphWriter
from lanes.keyword.sqlite_fts.writer import SqliteFtsWriter
from lanes.vector.numpy_flat.store import store_path
from lanes.vector.numpy_flat.writer import FlatVectorWriter
from lanes.vector.qdrant.writer import QdrantWriter, acquire_client, collection_name, release_client
from tests.support.embedded import BagEmbedder, resources, spec


def _writers(home: Path, embedder) -> list[StoreWriter]:
    res = resources(home, embedder)
    return [
        SqliteFtsWriter(spec(LaneKind.KEYWORD, "sqlite_fts"), res),
        QdrantWriter(spec(LaneKind.VECTOR, "qdrant"), res),
        SqliteGraphWriter(spec(LaneKind.GRAPH, "sqlite_graph"), res),
    ]


async def _run(docs: Path, home: Path, embedder, writers=None):
    writers = writers if writers is not None else _writers(home, embedder)
    try:
        return await ingest(docs, home=home, writers=writers, embedder=embedder)
    finally:
        for w in writers:
            await w.aclose()


def _sqlite_ids(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT id FROM chunks")}


async def _qdrant_ids(home: Path, embedder) -> set[str]:
    s = spec(LaneKind.VECTOR, "qdrant")
    key, client = acquire_client(s, resources(home, embedder))
    try:
        name = collection_name(s, embedder.name)
        if not await client.collection_exists(name):
            return set()
        points, _ = await client.scroll(name, limit=10_000, with_payload=True)
        return {p.payload["id"] for p in points}
    finally:
        await release_client(key, client)


async def _stores(home: Path, embedder) -> tuple[set[str], set[str], set[str]]:
    return (_sqlite_ids(home / "keyword.sqlite"), await _qdrant_ids(home, embedder), _sqlite_ids(home / "graph.sqlite"))


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    """A folder of three Markdown notes."""
    d = tmp_path / "docs"
    d.mkdir()
    for name in ("a", "b", "c"):
        (d / f"{name}.md").write_text(f"# Note {name.upper()}\n\nAbout Qdrant and topic {name}.\n")
    return d


class _Counting:
    """Wraps a writer and counts upserted chunks."""

    def __init__(self, inner: StoreWriter) -> None:
        self.inner, self.store, self.needs_vectors, self.upserted = inner, inner.store, inner.needs_vectors, 0

    async def open(self) -> None:
        await self.inner.open()

    async def upsert(self, chunks: Sequence[Chunk]) -> None:
        self.upserted += len(chunks)
        await self.inner.upsert(chunks)

    async def delete(self, ids: Sequence[str]) -> None:
        await self.inner.delete(ids)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Crashing(_Counting):
    """A writer that raises ``exc`` on upsert."""

    def __init__(self, inner: StoreWriter, exc: BaseException) -> None:
        super().__init__(inner)
        self.exc = exc

    async def upsert(self, chunks: Sequence[Chunk]) -> None:
        raise self.exc


class _Prefetching(_Counting):
    """A writer that records the batches it is told of in advance and the ones it writes."""

    def __init__(self, inner: StoreWriter) -> None:
        super().__init__(inner)
        self.calls: list[tuple[str, list[str]]] = []

    def prefetch(self, chunks: Sequence[Chunk]) -> None:
        self.calls.append(("prefetch", [c.id for c in chunks]))

    async def upsert(self, chunks: Sequence[Chunk]) -> None:
        self.calls.append(("upsert", [c.id for c in chunks]))
        await super().upsert(chunks)


def _notes_in_pairs(tmp_path: Path, n: int, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder of ``n`` Markdown notes, written by the pipeline in batches of 2."""
    import fabric.ingest.pipeline as pipeline

    monkeypatch.setattr(pipeline, "BATCH", 2)
    d = tmp_path / "docs"
    d.mkdir()
    for i in range(n):
        (d / f"n{i}.md").write_text(f"# Note {i}\n\nAbout Qdrant and topic {i}.\n")
    return d


async def test_a_prefetching_store_hears_of_each_next_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before writing batch i the pipeline names batch i+1 (an empty one after the last)."""
    d = _notes_in_pairs(tmp_path, 5, monkeypatch)
    home = tmp_path / "home"
    writer = _Prefetching(SqliteGraphWriter(spec(LaneKind.GRAPH, "sqlite_graph"), resources(home, None)))
    await _run(d, home, None, [writer])
    written = [ids for kind, ids in writer.calls if kind == "upsert"]
    assert [len(b) for b in written] == [2, 2, 1]
    expected: list[tuple[str, list[str]]] = []
    for i, batch in enumerate(written):
        expected += [("prefetch", written[i + 1] if i + 1 < len(written) else []), ("upsert", batch)]
    assert writer.calls == expected
    assert _sqlite_ids(home / "graph.sqlite") == {i for b in written for i in b}


class _CancelsItsTask(_Counting):
    """A store whose write task is cancelled at its first batch (the service stopping an ingest cancels the task
    that is reporting progress, which may be one store's)."""

    async def upsert(self, chunks: Sequence[Chunk]) -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(0)


class _Closable(_Counting):
    """A slow store that counts the batches it was asked to write after it was closed."""

    def __init__(self, inner: StoreWriter) -> None:
        super().__init__(inner)
        self.closed = False
        self.after_close = 0

    async def upsert(self, chunks: Sequence[Chunk]) -> None:
        await asyncio.sleep(0.01)
        if self.closed:
            self.after_close += 1
        await super().upsert(chunks)

    async def aclose(self) -> None:
        self.closed = True
        await super().aclose()


async def test_one_store_cancelled_stops_the_others_before_the_writers_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One store's write task cancelled: the others stop too before the caller closes the writers (they used to
    write on, into closed writers)."""
    d = _notes_in_pairs(tmp_path, 10, monkeypatch)
    home = tmp_path / "home"
    res = resources(home, None)
    slow = _Closable(SqliteFtsWriter(spec(LaneKind.KEYWORD, "sqlite_fts"), res))
    cancelled = _CancelsItsTask(SqliteGraphWriter(spec(LaneKind.GRAPH, "sqlite_graph"), res))
    with pytest.raises(asyncio.CancelledError):
        await _run(d, home, None, [cancelled, slow])
    written = slow.upserted
    await asyncio.sleep(0.2)
    assert (slow.upserted, slow.after_close) == (written, 0)
    assert written < 10


async def test_no_store_at_all_is_an_empty_write_stage(docs: Path, tmp_path: Path) -> None:
    """No writer (every lane off): the ingest still records its documents, and writes nowhere."""
    report = await _run(docs, tmp_path / "home", None, [])
    assert (report.docs, report.stores) == (3, {})


class TestIdempotency:
    async def test_first_run_writes_every_store(self, docs: Path, tmp_path: Path) -> None:
        """Every chunk lands in the keyword, vector and graph stores."""
        home, emb = tmp_path / "home", BagEmbedder()
        rep = await _run(docs, home, emb)
        assert rep.created == 3
        fts, vec, graph = await _stores(home, emb)
        assert fts == vec == graph
        assert len(fts) == 3

    async def test_unchanged_rerun_writes_nothing(self, docs: Path, tmp_path: Path) -> None:
        """Re-ingesting unchanged content embeds and writes nothing."""
        home, emb = tmp_path / "home", BagEmbedder()
        await _run(docs, home, emb)
        calls = emb.calls
        writers = [_Counting(w) for w in _writers(home, emb)]
        rep = await _run(docs, home, emb, writers)
        assert (rep.unchanged, rep.created, rep.updated) == (3, 0, 0)
        assert emb.calls == calls
        assert [w.upserted for w in writers] == [0, 0, 0]

    async def test_changed_file_updates(self, docs: Path, tmp_path: Path) -> None:
        """A changed file updates its chunk in every store and is audited."""
        home, emb = tmp_path / "home", BagEmbedder()
        await _run(docs, home, emb)
        (docs / "b.md").write_text("# Note B\n\nNow about bananas.\n")
        rep = await _run(docs, home, emb)
        assert (rep.updated, rep.unchanged) == (1, 2)
        with sqlite3.connect(home / "keyword.sqlite") as conn:
            assert conn.execute("SELECT text FROM chunks WHERE id LIKE '%b.md%'").fetchone()[0].endswith("bananas.")
        ledger = Ledger(home / "ledger.sqlite")
        assert [h["action"] for h in ledger.history("docs:b.md#note-b-0")] == ["create", "update"]
        ledger.close()

    async def test_removed_file_is_deleted_everywhere(self, docs: Path, tmp_path: Path) -> None:
        """A removed file's chunks leave every store and the history records the delete."""
        home, emb = tmp_path / "home", BagEmbedder()
        await _run(docs, home, emb)
        (docs / "c.md").unlink()
        rep = await _run(docs, home, emb)
        assert rep.deleted == 1
        for ids in await _stores(home, emb):
            assert ids == {"docs:a.md#note-a-0", "docs:b.md#note-b-0"}
        ledger = Ledger(home / "ledger.sqlite")
        assert ledger.history("docs:c.md#note-c-0")[-1]["action"] == "delete"
        ledger.close()


class TestRepair:
    async def test_interrupted_run_is_repaired(self, docs: Path, tmp_path: Path) -> None:
        """A run that dies while writing leaves pending rows; the next run makes every store consistent."""
        home, emb = tmp_path / "home", BagEmbedder()
        writers = _writers(home, emb)
        writers[2] = _Crashing(writers[2], RuntimeError("power cut"))
        with pytest.raises(RuntimeError):
            await _run(docs, home, emb, writers)
        rep = await _run(docs, home, emb)
        assert rep.repaired == 3
        fts, vec, graph = await _stores(home, emb)
        assert fts == vec == graph
        assert len(fts) == 3

    async def test_failed_store_is_repaired_alone(self, docs: Path, tmp_path: Path) -> None:
        """A store that fails is reported; the next run rewrites only that store."""
        home, emb = tmp_path / "home", BagEmbedder()
        writers = _writers(home, emb)
        writers[0] = _Crashing(writers[0], LaneUnavailable("disk full"))
        rep = await _run(docs, home, emb, writers)
        assert rep.stores["sqlite_fts"].startswith("error")
        counting = [_Counting(w) for w in _writers(home, emb)]
        rep = await _run(docs, home, emb, counting)
        assert rep.repaired == 3
        assert [w.upserted for w in counting] == [3, 0, 0]


class TestFailOpen:
    async def test_no_embedder_writes_lexical_stores(self, docs: Path, tmp_path: Path) -> None:
        """Without an embedder keyword and graph are written and the report says vectors are off."""
        home = tmp_path / "home"
        rep = await _run(docs, home, None)
        assert rep.embeddings.startswith("disabled")
        assert len(_sqlite_ids(home / "keyword.sqlite")) == 3
        assert len(_sqlite_ids(home / "graph.sqlite")) == 3

    async def test_vectors_are_added_when_embedder_returns(self, docs: Path, tmp_path: Path) -> None:
        """A later run with an embedder writes the missing vectors only."""
        home, emb = tmp_path / "home", BagEmbedder()
        await _run(docs, home, None)
        counting = [_Counting(w) for w in _writers(home, emb)]
        rep = await _run(docs, home, emb, counting)
        assert rep.repaired == 3
        assert [w.upserted for w in counting] == [0, 3, 0]
        assert len(await _qdrant_ids(home, emb)) == 3

    async def test_failing_embedder_is_fail_open(self, docs: Path, tmp_path: Path) -> None:
        """An embedder raising LaneUnavailable skips vectors, keeps lexical stores, and reports it."""

        class Down(BagEmbedder):
            def embed(self, texts):
                raise LaneUnavailable("model missing")

        home = tmp_path / "home"
        rep = await _run(docs, home, Down())
        assert rep.embeddings.startswith("unavailable")
        assert len(_sqlite_ids(home / "keyword.sqlite")) == 3


class TestIdConflicts:
    async def test_jsonl_id_of_a_markdown_chunk_is_refused(self, docs: Path, tmp_path: Path) -> None:
        """A JSONL entry whose id is a Markdown chunk id is refused with the holder; no store changes."""
        home = tmp_path / "home"
        emb = BagEmbedder()
        await _run(docs, home, emb)
        before = await _stores(home, emb)
        taken = sorted(before[0])[0]
        entries = tmp_path / "e.jsonl"
        entries.write_text(f'{{"id": "{taken}", "text": "hijack"}}\n{{"id": "fresh", "text": "new"}}\n')
        with pytest.raises(IdConflictError) as err:
            await _run(entries, home, emb)
        assert err.value.taken == {taken: "markdown:docs"}
        assert await _stores(home, emb) == before

    async def test_a_source_may_update_its_own_ids(self, docs: Path, tmp_path: Path) -> None:
        """Re-ingesting the same source with changed text is an update, not a conflict."""
        home = tmp_path / "home"
        emb = BagEmbedder()
        await _run(docs, home, emb)
        (docs / "a.md").write_text("# Note A\n\nRewritten about Qdrant.\n")
        report = await _run(docs, home, emb)
        assert report.updated == 1


# ---------------------------------------------------------------------------------------------- property tests

_IDS = [f"e{i}" for i in range(6)]
_TEXTS = ["qdrant local mode", "sqlite full text", "graph of entities", "rank fusion notes", "blue green deploys"]
_ENTRIES = st.dictionaries(st.sampled_from(_IDS), st.sampled_from(_TEXTS), min_size=1, max_size=5)


class _Crash(Exception):
    """The process "dies" right after one store's write (not a store failure: nothing is recorded)."""


class _CrashAfterWrite:
    """Wraps a real writer: writes the batch, then crashes the run."""

    def __init__(self, inner: StoreWriter) -> None:
        self.inner, self.store, self.needs_vectors = inner, inner.store, inner.needs_vectors

    async def open(self) -> None:
        await self.inner.open()

    async def upsert(self, chunks: Sequence[Chunk]) -> None:
        await self.inner.upsert(chunks)
        raise _Crash(self.store)

    async def delete(self, ids: Sequence[str]) -> None:
        await self.inner.delete(ids)
        raise _Crash(self.store)

    async def aclose(self) -> None:
        await self.inner.aclose()


class IngestMachine(RuleBasedStateMachine):
    """Ingest, re-ingest, shrink (deletes), delete by id (``fabric delete``) and crash one JSONL source into the
    three embedded stores; after every completed run the keyword, vector and graph stores and the ledger hold
    exactly the source's ids, and running the same source again changes nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="fabric-ingest-machine-"))
        self.home, self.src, self.emb = self.tmp / "home", self.tmp / "src.jsonl", BagEmbedder()
        self.expected: dict[str, str] = {}
        self.dirty = False  # a crashed run: stores may disagree until the next completed run

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _writers(self) -> list[StoreWriter]:
        res = resources(self.home, self.emb)
        return [
            SqliteFtsWriter(spec(LaneKind.KEYWORD, "sqlite_fts"), res),
            FlatVectorWriter(spec(LaneKind.VECTOR, "numpy_flat"), res),
            SqliteGraphWriter(spec(LaneKind.GRAPH, "sqlite_graph"), res),
        ]

    def _write_source(self, entries: dict[str, str]) -> None:
        self.src.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in entries.items()))

    async def _ingest(self, writers: list[StoreWriter]) -> Any:
        try:
            return await ingest(self.src, home=self.home, writers=writers, embedder=self.emb)
        except _Crash:
            while len(asyncio.all_tasks()) > 1:  # noqa: ASYNC110 (the other stores finish the batch they were writing)
                await asyncio.sleep(0.001)
            raise
        finally:
            for w in writers:
                await w.aclose()

    def _run(self, writers: list[StoreWriter] | None = None) -> Any:
        return asyncio.run(self._ingest(writers if writers is not None else self._writers()))

    @rule(entries=_ENTRIES)
    def ingest_source(self, entries: dict[str, str]) -> None:
        """A completed run: created/updated/unchanged/repaired cover every entry; ids dropped are deleted."""
        before, was_dirty = dict(self.expected), self.dirty
        self._write_source(entries)
        report = self._run()
        assert report.created + report.updated + report.unchanged + report.repaired == len(entries)
        assert not report.failed_stores
        if not was_dirty:
            assert report.deleted == len(set(before) - set(entries))
            assert report.created == len(set(entries) - set(before))
        self.expected, self.dirty = dict(entries), False

    @rule()
    def reingest_same(self) -> None:
        """Running the same source again writes nothing (after a crash: it repairs, and only then)."""
        if not self.expected:
            return
        report = self._run()
        assert (report.created, report.updated) == (0, 0)
        if not self.dirty:  # after a crash, the crashed run's leftovers (ids its source no longer has) go now
            assert (report.repaired, report.unchanged, report.deleted) == (0, len(self.expected), 0)
        self.dirty = False

    @rule(entries=_ENTRIES, store=st.integers(0, 2))
    def crash_during_write(self, entries: dict[str, str], store: int) -> None:
        """The run dies right after one store wrote its batch: the ledger keeps the work pending."""
        self._write_source(entries)
        writers = self._writers()
        writers[store] = _CrashAfterWrite(writers[store])
        try:
            self._run(writers)
        except _Crash:
            self.dirty = True
        self.expected = dict(entries)  # what the next completed run must leave in every store

    @precondition(lambda self: bool(self.expected) and not self.dirty)
    @rule(data=st.data())
    def delete_by_id(self, data: st.DataObject) -> None:
        """Deleting one entry by id (``fabric delete --id``, ``DELETE /v1/entries/{id}``) removes it from every
        store and the ledger; the source then no longer holds it, so re-running the source writes nothing."""
        victim = data.draw(st.sampled_from(sorted(self.expected)))

        async def run() -> Any:
            writers = self._writers()
            try:
                return await delete_entries(self.home, writers, ids=[victim])
            finally:
                for w in writers:
                    await w.aclose()

        report = asyncio.run(run())
        assert report.ok
        del self.expected[victim]
        self._write_source(self.expected)

    @invariant()
    def stores_agree_with_the_ledger(self) -> None:
        if self.dirty or not self.home.exists():
            return
        vec = store_path(spec(LaneKind.VECTOR, "numpy_flat"), resources(self.home), self.emb.name)
        with sqlite3.connect(vec) as conn:
            vector_ids = {r[0] for r in conn.execute("SELECT id FROM vec")}
        ledger = Ledger(self.home / "ledger.sqlite")
        try:
            rows = ledger.conn.execute("SELECT id, state, stores FROM ledger").fetchall()
        finally:
            ledger.close()
        want = set(self.expected)
        assert _sqlite_ids(self.home / "keyword.sqlite") == want
        assert _sqlite_ids(self.home / "graph.sqlite") == want
        assert vector_ids == want
        assert {r[0] for r in rows} == want
        assert all(state == "done" for _, state, _ in rows)
        assert all(stores == '["numpy_flat", "sqlite_fts", "sqlite_graph"]' for _, _, stores in rows)


IngestMachine.TestCase.settings = settings(
    max_examples=8, stateful_step_count=5, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestIngestMachine = IngestMachine.TestCase
