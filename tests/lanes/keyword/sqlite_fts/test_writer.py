"""SqliteFtsWriter: replace and delete by id, and the upgrade of a store written before the feature columns."""

from __future__ import annotations

from pathlib import Path

import lanes.keyword.sqlite_fts.writer as mod
from fabric.core.models import LaneKind, LaneRequest
from lanes.keyword.sqlite_fts.lane import SqliteFtsKeywordLane
from lanes.keyword.sqlite_fts.writer import SqliteFtsWriter
from tests.lanes.keyword.sqlite_fts import test_lane as lane_tests
from tests.support.embedded import chunk, resources, spec

lane = lane_tests.lane
"""The keyword lane over a store holding the lane tests' corpus (a fixture)."""
ids = lane_tests.ids


class TestStore:
    async def test_upsert_replaces_by_id(self, tmp_path: Path, lane: SqliteFtsKeywordLane) -> None:
        """Upserting an id again replaces its text in the index."""
        store = SqliteFtsWriter(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path))
        await store.upsert([chunk("b", "Now about tokamaks.", title="Reactor v2")])
        await store.aclose()
        assert ids(await lane.search(LaneRequest(query="tokamaks", top_k=5))) == ["b"]
        assert ids(await lane.search(LaneRequest(query="hot", top_k=5))) == []

    async def test_delete_removes_from_index(self, tmp_path: Path, lane: SqliteFtsKeywordLane) -> None:
        """Deleted ids no longer match."""
        store = SqliteFtsWriter(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path))
        await store.delete(["d"])
        await store.aclose()
        assert ids(await lane.search(LaneRequest(query="qdrant", top_k=5))) == []


class TestOlderStore:
    async def test_store_without_feature_columns_gains_them(self, tmp_path: Path) -> None:
        """A store written before the feature columns existed is opened, searched (features None) and upgraded."""
        import sqlite3

        from lanes.keyword.sqlite_fts.writer import FTS_SCHEMA
        from lanes.sqlite_common import CHUNKS_DDL

        old_ddl = CHUNKS_DDL.replace(",\n    simhash TEXT,\n    url_key TEXT,\n    title_key TEXT", "")
        assert "simhash" not in old_ddl
        conn = sqlite3.connect(tmp_path / "keyword.sqlite")
        conn.executescript(FTS_SCHEMA.replace(CHUNKS_DDL, old_ddl))
        with conn:
            conn.execute(
                "INSERT INTO chunks (id, doc_id, chunk_id, title, text, url, domain, published_at, years, source_kind,"
                " source_ref, trust, quality, metadata) VALUES ('o', 'o', 'o', 'Old', 'old rank fusion text', '', '',"
                " NULL, '[]', 'import', 'test', 'untrusted', 0.5, '{}')"
            )
        conn.close()
        async with SqliteFtsKeywordLane(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path)) as lane:
            hits = await lane.search(LaneRequest(query="fusion", top_k=5))
        assert [(h.id, h.simhash, h.url_key, h.title_key) for h in hits] == [("o", None, None, None)]
        store = SqliteFtsWriter(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path))
        await store.upsert([chunk("o", "old rank fusion text", title="Old")])
        await store.aclose()
        async with SqliteFtsKeywordLane(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path)) as again:
            hit = (await again.search(LaneRequest(query="fusion", top_k=5)))[0]
        assert (hit.simhash, hit.title_key) == (chunk("o", "old rank fusion text").simhash, "old")


def test_fts_path_defaults_under_home(tmp_path: Path) -> None:
    """The store file is ``<home>/keyword.sqlite`` unless ``options.path`` names one."""
    assert mod.fts_path(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path)) == tmp_path / "keyword.sqlite"
    custom = spec(LaneKind.KEYWORD, "sqlite_fts", path=str(tmp_path / "k.db"))
    assert mod.fts_path(custom, resources(tmp_path)) == tmp_path / "k.db"


def test_public_api() -> None:
    """The module exports the writer, its schema and its path helper."""
    assert set(mod.__all__) == {"FTS_SCHEMA", "SqliteFtsWriter", "fts_path"}
