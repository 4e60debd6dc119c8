"""Store agreement on the real embedded stores (FTS5, flat vectors, SQLite graph) and a real ledger: what the check
finds after each kind of damage a crash leaves, and what the repair does; and on the server stores (Meilisearch,
ArangoDB) through their writers against the loopback wire-format stand-ins."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import fabric.ingest.check as mod
from fabric.core.chunks import StoreWriter
from fabric.core.models import LaneKind
from fabric.ingest.check import check_stores, pending_rows
from fabric.ingest.ledger import LEDGER_FILE, Ledger
from fabric.ingest.pipeline import ingest
from fabric.ingest.provenance import Provenance
from lanes.base import LaneResources, LaneSpec
from lanes.graph.arango.writer import ArangoGraphWriter
from lanes.graph.sqlite_graph.writer import SqliteGraphWriter
from lanes.keyword.meilisearch.writer import MeilisearchWriter
from lanes.keyword.sqlite_fts.writer import SqliteFtsWriter
from lanes.server_records import chunk_key
from lanes.vector.numpy_flat.writer import FlatVectorWriter
from tests.lanes.graph.fake_arango import FakeArango
from tests.lanes.keyword.fake_meili import FakeMeili
from tests.support.embedded import BagEmbedder, chunk, resources, spec
from tests.support.http import serve


def _writers(home: Path, embedder: BagEmbedder) -> list[StoreWriter]:
    res = resources(home, embedder)
    return [
        SqliteFtsWriter(spec(LaneKind.KEYWORD, "sqlite_fts"), res),
        FlatVectorWriter(spec(LaneKind.VECTOR, "numpy_flat"), res),
        SqliteGraphWriter(spec(LaneKind.GRAPH, "sqlite_graph"), res),
    ]


async def _check(home: Path, embedder: BagEmbedder, *, repair: bool = False) -> mod.CheckReport:
    writers = _writers(home, embedder)
    try:
        return await check_stores(home, writers, repair=repair)
    finally:
        for w in writers:
            await w.aclose()


async def _ingest(docs: Path, home: Path, embedder: BagEmbedder) -> None:
    writers = _writers(home, embedder)
    try:
        await ingest(docs, home=home, writers=writers, embedder=embedder)
    finally:
        for w in writers:
            await w.aclose()


@pytest.fixture
def embedder() -> BagEmbedder:
    return BagEmbedder()


@pytest.fixture
async def home(tmp_path: Path, embedder: BagEmbedder) -> Path:
    """A home holding four JSONL entries in all three stores."""
    docs = tmp_path / "entries.jsonl"
    docs.write_text("".join(f'{{"id": "e{i}", "text": "entry number {i} about graphs"}}\n' for i in range(4)))
    h = tmp_path / "home"
    await _ingest(docs, h, embedder)
    return h


def _ids(db: Path, table: str = "chunks") -> set[str]:
    with sqlite3.connect(db) as conn:
        return {r[0] for r in conn.execute(f"SELECT id FROM {table}")}


class TestCheck:
    async def test_a_clean_ingest_agrees(self, home: Path, embedder: BagEmbedder) -> None:
        """Every store holds the four ids the ledger records; nothing pending, nothing incomplete."""
        report = await _check(home, embedder)
        assert report.agree
        assert (report.ledger, report.pending, report.incomplete) == (4, 0, {})
        assert {name: (s.count, s.expected) for name, s in report.stores.items()} == {
            "sqlite_fts": (4, 4), "numpy_flat": (4, 4), "sqlite_graph": (4, 4),
        }  # fmt: skip

    async def test_empty_home_agrees_without_creating_a_ledger(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """No ledger, empty stores: agreement, and no ledger file appears."""
        report = await _check(tmp_path / "h", embedder)
        assert report.agree
        assert not (tmp_path / "h" / LEDGER_FILE).exists()
        assert pending_rows(tmp_path / "h") == 0

    async def test_differences_are_found_per_store(self, home: Path, embedder: BagEmbedder) -> None:
        """A missing graph chunk, an extra keyword chunk and a pending ledger row are each reported."""
        graph = SqliteGraphWriter(spec(LaneKind.GRAPH, "sqlite_graph"), resources(home, embedder))
        await graph.delete(["e0"])
        await graph.aclose()
        fts = SqliteFtsWriter(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(home, embedder))
        await fts.upsert([chunk("stray", "a chunk no ledger knows")])
        await fts.aclose()
        led = Ledger(home / LEDGER_FILE)
        led.mark_pending([], ["e3"])  # a delete that a crash interrupted
        led.close()
        report = await _check(home, embedder)
        assert not report.agree
        assert report.pending == 1
        assert report.stores["sqlite_graph"].missing == ["e0"]
        assert report.stores["sqlite_fts"].extra == ["stray"]
        assert report.to_dict()["stores"]["sqlite_fts"]["extra_ids"] == ["stray"]


class TestRepair:
    async def test_interrupted_write_is_rolled_back_everywhere(self, home: Path, embedder: BagEmbedder) -> None:
        """A pending upsert held by some stores only: the repair removes it from every store and the ledger."""
        led = Ledger(home / LEDGER_FILE)
        led.mark_pending([("new", "new", "jsonl:x", "h", Provenance("operator"))], [])
        led.close()
        fts = SqliteFtsWriter(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(home, embedder))
        await fts.upsert([chunk("new", "written to one store before the crash")])
        await fts.aclose()
        assert pending_rows(home) == 1
        report = await _check(home, embedder, repair=True)
        assert report.agree
        assert report.before is not None
        assert report.before["agree"] is False
        assert report.repaired is not None
        assert report.repaired["rolled_back"] == 1
        assert "new" not in _ids(home / "keyword.sqlite")
        assert pending_rows(home) == 0
        led = Ledger(home / LEDGER_FILE)
        assert led.history("new")[-1]["action"] == "rollback"
        led.close()

    async def test_every_difference_is_repaired(self, home: Path, embedder: BagEmbedder) -> None:
        """Extra ids go, interrupted deletes finish, missing chunks are recorded as missing (then ingest heals)."""
        vec = FlatVectorWriter(spec(LaneKind.VECTOR, "numpy_flat"), resources(home, embedder))
        await vec.delete(["e1"])
        await vec.aclose()
        fts = SqliteFtsWriter(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(home, embedder))
        await fts.upsert([chunk("stray", "a chunk no ledger knows")])
        await fts.aclose()
        led = Ledger(home / LEDGER_FILE)
        led.mark_pending([], ["e3"])
        source = next(iter(led.all_entries())).source
        led.close()
        report = await _check(home, embedder, repair=True)
        assert report.agree
        assert report.repaired == {
            "deleted_from_stores": 4, "rolled_back": 0, "deletes_finished": 1, "marked_missing": 1,
        }  # fmt: skip
        assert _ids(home / "keyword.sqlite") == {"e0", "e1", "e2"}
        assert report.incomplete == {source: 1}
        # the next ingest of the source writes e1 to the vector store again, and e3 back everywhere
        await _ingest(Path(source.partition(":")[2]), home, embedder)
        healed = await _check(home, embedder)
        assert healed.agree
        assert healed.incomplete == {}
        assert {s.count for s in healed.stores.values()} == {4}

    async def test_a_store_that_cannot_be_written_keeps_rows_pending(self, home: Path, embedder: BagEmbedder) -> None:
        """A store whose delete fails is reported and the ledger rows stay pending for a later repair."""

        class Broken(SqliteFtsWriter):
            async def delete(self, ids: object) -> None:
                raise OSError(30, "Read-only file system")

        led = Ledger(home / LEDGER_FILE)
        led.mark_pending([], ["e2"])
        led.close()
        res = resources(home, embedder)
        writers: list[StoreWriter] = [Broken(spec(LaneKind.KEYWORD, "sqlite_fts"), res)]
        report = await check_stores(home, writers, repair=True)
        await writers[0].aclose()
        assert not report.agree
        assert "Read-only file system" in report.errors["sqlite_fts"]
        assert pending_rows(home) == 1


def _server_writers(home: Path, meili_port: int, arango_port: int) -> list[StoreWriter]:
    res = LaneResources(home=home)
    meili = LaneSpec(
        name="keyword",
        kind=LaneKind.KEYWORD,
        backend="meilisearch",
        options={"url": f"http://127.0.0.1:{meili_port}", "task_timeout_s": 5, "batch_size": 3},
    )
    arango = LaneSpec(name="graph", kind=LaneKind.GRAPH, backend="arango",
                      options={"url": f"http://127.0.0.1:{arango_port}", "write_timeout_s": 5})  # fmt: skip
    graph = ArangoGraphWriter(arango, res)
    graph.id_batch = 3  # several cursor batches for 7 chunks
    return [MeilisearchWriter(meili, res), graph]


async def _with_servers(
    home: Path, mp: int, ap: int, docs: Path | None = None, *, repair: bool = False
) -> mod.CheckReport:
    writers = _server_writers(home, mp, ap)
    try:
        if docs is not None:
            await ingest(docs, home=home, writers=writers, embedder=None)
        return await check_stores(home, writers, repair=repair, vectors=False)
    finally:
        for w in writers:
            await w.aclose()


class TestServerStores:
    async def test_check_and_repair_cover_meilisearch_and_arango(self, tmp_path: Path) -> None:
        """Both server stores are listed (none unchecked); a lost and a stray document in each are found, the repair
        removes the strays and records the losses, and the next ingest of the source makes everything agree."""
        docs = tmp_path / "entries.jsonl"
        docs.write_text("".join(f'{{"id": "e{i}", "text": "Entry {i} about Graphs"}}\n' for i in range(7)))
        meili, arango = FakeMeili(), FakeArango()
        async with serve(meili.app()) as ms, serve(arango.app()) as ars:
            home = tmp_path / "home"
            clean = await _with_servers(home, ms.port, ars.port, docs)
            assert clean.agree
            assert clean.unchecked == []
            assert {n: (s.count, s.expected) for n, s in clean.stores.items()} == {"meilisearch": (7, 7),
                                                                                    "arango": (7, 7)}  # fmt: skip
            meili.indexes["chunks"]["docs"].pop(chunk_key("e2"))
            meili_key = chunk_key("m-stray")  # a document our writer wrote, whose ledger row is gone
            meili.indexes["chunks"]["docs"][meili_key] = {"id": meili_key, "chunk_id": "m-stray", "text": "x"}
            arango.collections["chunks"]["docs"].pop(chunk_key("e5"))
            stray_key = chunk_key("a-stray")
            arango.collections["chunks"]["docs"][stray_key] = {"_key": stray_key, "chunk_id": "a-stray"}
            damaged = await _with_servers(home, ms.port, ars.port)
            assert not damaged.agree
            assert (damaged.stores["meilisearch"].missing, damaged.stores["meilisearch"].extra) == (["e2"], ["m-stray"])
            assert (damaged.stores["arango"].missing, damaged.stores["arango"].extra) == (["e5"], ["a-stray"])
            repaired = await _with_servers(home, ms.port, ars.port, repair=True)
            assert repaired.agree
            assert repaired.repaired is not None
            assert (repaired.repaired["deleted_from_stores"], repaired.repaired["marked_missing"]) == (2, 2)
            assert stray_key not in arango.collections["chunks"]["docs"]
            assert len(repaired.incomplete) == 1
            healed = await _with_servers(home, ms.port, ars.port, docs)
        assert healed.agree
        assert healed.incomplete == {}
        assert {s.count for s in healed.stores.values()} == {7}


def test_public_api() -> None:
    """The module exports the check, its report types and the pending-row probe."""
    assert set(mod.__all__) == {"CheckReport", "StoreState", "check_stores", "pending_rows"}
