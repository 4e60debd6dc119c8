"""Delete by entry id and by source from every store, per backend: the embedded stores (SQLite FTS5, local Qdrant,
numpy_flat, the SQLite graph with its triples) and the server writers against the loopback Meilisearch and
ArangoDB stand-ins; the ledger forgets the chunks and the audit history records them."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from fabric.core.chunks import StoreWriter
from fabric.core.errors import IngestError
from fabric.core.models import LaneKind
from fabric.ingest.audit import Actor, AuditLog, acting_as
from fabric.ingest.deletion import DeleteReport, NothingToDelete, delete_entries, matching_sources
from fabric.ingest.ledger import LEDGER_FILE, Ledger
from fabric.ingest.pipeline import ingest
from fabric.ingest.writers import build_writers
from fabric.settings import load_settings
from lanes.base import LaneResources
from lanes.graph.sqlite_graph.writer import SqliteGraphWriter
from lanes.keyword.sqlite_fts.writer import SqliteFtsWriter
from lanes.server_records import chunk_key
from lanes.vector.numpy_flat.writer import FlatVectorWriter
from lanes.vector.qdrant.writer import QdrantWriter
from tests.fabric.ingest.test_pipeline import _qdrant_ids, _sqlite_ids
from tests.lanes.graph.fake_arango import FakeArango
from tests.lanes.keyword.fake_meili import FakeMeili
from tests.support.embedded import BagEmbedder, resources, spec
from tests.support.http import serve

ENTRIES = [
    {"id": "rrf", "title": "Reciprocal rank fusion", "text": "Reciprocal Rank Fusion fuses BM25 and Dense rankings."},
    {"id": "bm25", "title": "Okapi BM25", "text": "Okapi BM25 ranks documents. Meilisearch uses BM25 ranking."},
    {"id": "dense", "title": "Dense retrieval", "text": "Dense Retrieval embeds queries with MiniLM and Qdrant."},
]


def _jsonl(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _embedded(home: Path, embedder: BagEmbedder, vector: str = "qdrant") -> list[StoreWriter]:
    res = resources(home, embedder)
    vec = QdrantWriter if vector == "qdrant" else FlatVectorWriter
    return [
        SqliteFtsWriter(spec(LaneKind.KEYWORD, "sqlite_fts"), res),
        vec(spec(LaneKind.VECTOR, vector), res),
        SqliteGraphWriter(spec(LaneKind.GRAPH, "sqlite_graph"), res),
    ]


async def _with(writers: list[StoreWriter], coro_fn):  # type: ignore[no-untyped-def]
    try:
        return await coro_fn(writers)
    finally:
        for w in writers:
            await w.aclose()


def _graph_rows(home: Path, chunk_id: str) -> tuple[int, int]:
    with sqlite3.connect(home / "graph.sqlite") as conn:
        rel = conn.execute("SELECT count(*) FROM relations WHERE chunk_id = ?", (chunk_id,)).fetchone()[0]
        men = conn.execute("SELECT count(*) FROM mentions WHERE chunk_id = ?", (chunk_id,)).fetchone()[0]
    return int(rel), int(men)


def _ledger_ids(home: Path) -> set[str]:
    ledger = Ledger(home / LEDGER_FILE)
    try:
        return {e.id for e in ledger.matching([], ledger.sources())}
    finally:
        ledger.close()


@pytest.fixture
def embedder() -> BagEmbedder:
    """The deterministic bag-of-words embedder."""
    return BagEmbedder()


class TestEmbeddedStores:
    async def test_delete_by_id_removes_chunk_everywhere(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """Keyword, vector and graph stores (relations and mentions too) and the ledger lose the entry."""
        home = tmp_path / "home"
        src = _jsonl(tmp_path / "notes.jsonl", ENTRIES)
        await _with(_embedded(home, embedder), lambda ws: ingest(src, home=home, writers=ws, embedder=embedder))
        assert _graph_rows(home, "bm25")[1] > 0
        with acting_as(Actor(tenant="default", key_id="k1", via="api")):
            report = await _with(_embedded(home, embedder), lambda ws: delete_entries(home, ws, ids=["bm25"]))
        assert (report.matched, report.deleted, report.ok) == (1, 1, True)
        assert set(report.stores) == {"sqlite_fts", "qdrant", "sqlite_graph"}
        assert _sqlite_ids(home / "keyword.sqlite") == {"rrf", "dense"}
        assert _sqlite_ids(home / "graph.sqlite") == {"rrf", "dense"}
        assert await _qdrant_ids(home, embedder) == {"rrf", "dense"}
        assert _graph_rows(home, "bm25") == (0, 0)
        assert _ledger_ids(home) == {"rrf", "dense"}

    async def test_delete_by_source_with_numpy_flat(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """A source given by its path removes all its chunks from the numpy_flat vector store too."""
        home = tmp_path / "home"
        src = _jsonl(tmp_path / "notes.jsonl", ENTRIES)
        other = _jsonl(tmp_path / "other.jsonl", [{"id": "keep", "text": "Kept entry about Qdrant."}])
        for path in (src, other):
            await _with(
                _embedded(home, embedder, "numpy_flat"),
                lambda ws, p=path: ingest(p, home=home, writers=ws, embedder=embedder),
            )
        report = await _with(
            _embedded(home, embedder, "numpy_flat"), lambda ws: delete_entries(home, ws, source=str(src))
        )
        assert sorted(report.ids) == ["bm25", "dense", "rrf"]
        assert _sqlite_ids(home / "keyword.sqlite") == {"keep"}
        flat = FlatVectorWriter(spec(LaneKind.VECTOR, "numpy_flat"), resources(home, embedder))
        with sqlite3.connect(flat.path) as conn:
            assert {r[0] for r in conn.execute("SELECT id FROM vec")} == {"keep"}

    async def test_unknown_id_and_source(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """Nothing stored under the id or source: NothingToDelete naming the field; no argument: IngestError."""
        home = tmp_path / "home"
        with pytest.raises(NothingToDelete, match="no stored entry with id 'nope'") as exc:
            await _with(_embedded(home, embedder), lambda ws: delete_entries(home, ws, ids=["nope"]))
        assert (exc.value.field, exc.value.status) == ("id", 404)
        with pytest.raises(NothingToDelete) as exc:
            await _with(_embedded(home, embedder), lambda ws: delete_entries(home, ws, source="jsonl:x.jsonl"))
        assert exc.value.field == "source"
        with pytest.raises(IngestError, match="give entry ids or a source"):
            await delete_entries(home, [])

    async def test_audit_records_entries_and_triples(self, tmp_path: Path, embedder: BagEmbedder) -> None:
        """Ingest records created entries and triples; a delete records them deleted, with the actor."""
        home = tmp_path / "home"
        src = _jsonl(tmp_path / "notes.jsonl", ENTRIES)
        with acting_as(Actor(tenant="default", key_id="kid", task_id="t1", via="api")):
            await _with(_embedded(home, embedder), lambda ws: ingest(src, home=home, writers=ws, embedder=embedder))
        await _with(_embedded(home, embedder), lambda ws: delete_entries(home, ws, ids=["rrf"]))
        log = AuditLog(home)
        try:
            rows = log.page("default", entry_id="rrf").records
        finally:
            log.close()
        entries = [(r.action, r.subject, r.task_id, r.key_id) for r in rows if r.subject == "entry"]
        assert entries == [("created", "entry", "t1", "kid"), ("deleted", "entry", None, None)]
        created = {t for r in rows if r.subject == "triple" and r.action == "created" for t in r.triples}
        deleted = {t for r in rows if r.subject == "triple" and r.action == "deleted" for t in r.triples}
        assert created
        assert created == deleted
        assert all(r.source == "jsonl:notes.jsonl" for r in rows)


def _server_settings(tmp: Path, meili_port: int, arango_port: int):  # type: ignore[no-untyped-def]
    user = tmp / "servers.toml"
    user.write_text(f"""schema = 1
[lanes.keyword]
backend = "meilisearch"
options = {{ url = "http://127.0.0.1:{meili_port}", task_timeout_s = 5.0 }}
[lanes.graph]
backend = "arango"
options = {{ url = "http://127.0.0.1:{arango_port}", database = "fabric" }}
[lanes.vector]
enabled = false
[embeddings]
backend = "none"
""")
    return load_settings(user_file=user, env={"FABRIC_HOME": str(tmp / "home")})


class TestServerStores:
    async def test_delete_from_meilisearch_and_arango(self, tmp_path: Path) -> None:
        """The entry leaves the Meilisearch index and ArangoDB (chunk, relations, mentions); triples audited."""
        src = _jsonl(tmp_path / "notes.jsonl", ENTRIES)
        meili, arango = FakeMeili(), FakeArango()
        async with serve(meili.app()) as ms, serve(arango.app()) as ars:
            settings = _server_settings(tmp_path, ms.port, ars.port)
            home = settings.home

            def writers() -> list[StoreWriter]:
                return build_writers(settings, LaneResources(home=home))

            await _with(writers(), lambda ws: ingest(src, home=home, writers=ws, embedder=None))
            key = chunk_key("bm25")
            relations = arango.collections["relations"]["docs"].values()
            assert any(r["chunk_key"] == key for r in relations)
            report: DeleteReport = await _with(writers(), lambda ws: delete_entries(home, ws, ids=["bm25"]))
        assert report.stores == {"meilisearch": "ok", "arango": "ok"}
        assert key not in meili.indexes["chunks"]["docs"]
        assert len(meili.indexes["chunks"]["docs"]) == 2
        assert key not in arango.collections["chunks"]["docs"]
        assert not any(r["chunk_key"] == key for r in arango.collections["relations"]["docs"].values())
        assert not any(m["_to"] == f"chunks/{key}" for m in arango.collections["mentions"]["docs"].values())
        log = AuditLog(home)
        try:
            rows = log.page("default", entry_id="bm25").records
        finally:
            log.close()
        triples = {(r.action, t) for r in rows if r.subject == "triple" for t in r.triples}
        assert {a for a, _ in triples} == {"created", "deleted"}

    async def test_failed_store_leaves_rows_pending(self, tmp_path: Path) -> None:
        """A server that is down: the report names it, the ledger keeps the rows, a repeated delete finishes."""
        src = _jsonl(tmp_path / "notes.jsonl", ENTRIES)
        arango = FakeArango()
        async with serve(arango.app()) as ars:
            async with serve(FakeMeili().app()) as ms:
                settings = _server_settings(tmp_path, ms.port, ars.port)
                home = settings.home
                ws = build_writers(settings, LaneResources(home=home))
                await _with(ws, lambda w: ingest(src, home=home, writers=w, embedder=None))
            ws = build_writers(settings, LaneResources(home=home))  # Meilisearch is gone now
            report = await _with(ws, lambda w: delete_entries(home, w, ids=["rrf"]))
            assert not report.ok
            assert report.stores["meilisearch"].startswith("error")
            assert report.stores["arango"] == "ok"
            assert report.audited == 0
            assert "rrf" in _ledger_ids(home)
            async with serve(FakeMeili().app()) as ms2:
                settings = _server_settings(tmp_path, ms2.port, ars.port)
                ws = build_writers(settings, LaneResources(home=home))
                again = await _with(ws, lambda w: delete_entries(home, w, ids=["rrf"]))
        assert again.ok
        assert "rrf" not in _ledger_ids(home)


def test_matching_sources(tmp_path: Path) -> None:
    """A source matches by its public form, its raw form or a path resolving to it."""
    home = tmp_path / "home"
    raw = [f"jsonl:{tmp_path / 'a.jsonl'}", f"jsonl:{(home / 'spool').resolve()}/x/entries.jsonl", "markdown:/d/n"]
    assert matching_sources(raw, "jsonl:a.jsonl", home) == [raw[0]]
    assert matching_sources(raw, str(tmp_path / "a.jsonl"), home) == [raw[0]]
    assert matching_sources(raw, "api", home) == [raw[1]]
    assert matching_sources(raw, "markdown:/d/n", home) == [raw[2]]
    assert matching_sources(raw, "nothing", home) == []
