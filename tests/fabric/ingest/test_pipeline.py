"""Tests of the ingestion pipeline: idempotency, updates, removals, interrupted-run repair, fail-open embeddings."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from fabric.errors import LaneUnavailable
from fabric.ingest.ledger import Ledger
from fabric.ingest.model import Chunk, StoreWriter
from fabric.ingest.pipeline import IdConflictError, ingest
from fabric.models import LaneKind
from lanes.graph.sqlite_writer import SqliteGraphWriter
from lanes.keyword.sqlite_fts_writer import SqliteFtsWriter
from lanes.vector.qdrant_writer import QdrantWriter, acquire_client, collection_name, release_client
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
