"""MeilisearchWriter against a loopback Meilisearch stand-in: index set-up, idempotent upserts, bounded task waits."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

import lanes.keyword.meilisearch.writer as mod
from fabric.core.chunks import ListableStore
from fabric.core.errors import ConfigError, IngestError
from fabric.core.models import LaneKind
from lanes.base import LaneSpec
from lanes.keyword.meilisearch.writer import INDEX_SETTINGS
from lanes.server_records import chunk_key
from tests.lanes.keyword.fake_meili import FakeMeili
from tests.lanes.keyword.meilisearch.test_lane import CHUNKS, _ingest, _store
from tests.support.http import guarded, serve


class TestMeilisearchWriter:
    async def test_index_created_with_settings_and_safe_ids(self) -> None:
        """Ingest creates the index, applies settings and stores documents under deterministic safe ids."""
        fake = FakeMeili()
        async with serve(fake.app()) as srv, guarded(["meilisearch.test"]) as session:
            await _ingest(srv.port, session)
        index = fake.indexes["chunks"]
        assert index["settings"] == INDEX_SETTINGS
        assert set(index["docs"]) == {chunk_key(c.id) for c in CHUNKS}

    async def test_repeated_ingest_does_not_duplicate(self) -> None:
        """A second ingest of the same chunks overwrites the same ids (index_already_exists tolerated)."""
        fake = FakeMeili()
        async with serve(fake.app()) as srv, guarded(["meilisearch.test"]) as session:
            await _ingest(srv.port, session)
            await _ingest(srv.port, session)
        assert len(fake.indexes["chunks"]["docs"]) == 3

    async def test_delete(self) -> None:
        """delete removes documents by key."""
        fake = FakeMeili()
        async with serve(fake.app()) as srv, guarded(["meilisearch.test"]) as session:
            writer = await _ingest(srv.port, session)
            await writer.delete(["d1#0"])
        assert len(fake.indexes["chunks"]["docs"]) == 2

    async def test_task_wait_is_bounded(self) -> None:
        """A task that never finishes fails the ingest after task_timeout_s."""
        async with serve(_stuck_app()) as srv, guarded(["meilisearch.test"]) as session:
            writer = _store(srv.port, session, task_timeout_s=0.05)
            with pytest.raises(IngestError, match="still processing"):
                await writer.upsert(CHUNKS)


class TestListIds:
    async def test_ids_are_fetched_in_pages(self) -> None:
        """ids() pages through documents/fetch (limit = batch_size) asking only the id fields."""
        fake = FakeMeili()
        async with serve(fake.app()) as srv, guarded(["meilisearch.test"]) as session:
            writer = _store(srv.port, session, batch_size=2)
            await writer.upsert(CHUNKS)
            assert isinstance(writer, ListableStore)
            found = await writer.ids()
        assert found == {c.id for c in CHUNKS}
        assert [(f["offset"], f["limit"]) for f in fake.fetches] == [(0, 2), (2, 2)]
        assert all(f["fields"] == ["id", "chunk_id"] for f in fake.fetches)

    async def test_ids_follow_deletes(self) -> None:
        """A deleted document is no longer listed; an emptied index lists nothing."""
        fake = FakeMeili()
        async with serve(fake.app()) as srv, guarded(["meilisearch.test"]) as session:
            writer = await _ingest(srv.port, session)
            await writer.delete(["d1#0"])
            after_delete = await writer.ids()
            await writer.delete([c.id for c in CHUNKS])
            empty = await writer.ids()
        assert (after_delete, empty) == ({c.id for c in CHUNKS} - {"d1#0"}, set())

    async def test_a_bad_answer_is_an_ingest_error(self) -> None:
        """A fetch answer without a results list is one IngestError, never a KeyError."""
        async with serve(_broken_fetch_app(FakeMeili())) as srv, guarded(["meilisearch.test"]) as session:
            writer = _store(srv.port, session)
            with pytest.raises(IngestError, match="no results list"):
                await writer.ids()


def _broken_fetch_app(fake: FakeMeili) -> web.Application:
    """The stand-in, except that documents/fetch answers a search-shaped body."""

    @web.middleware
    async def broken(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path.endswith("/documents/fetch"):
            return web.json_response({"hits": []})
        resp: web.StreamResponse = await handler(request)
        return resp

    app = fake.app()
    app.middlewares.append(broken)
    return app


def _stuck_app() -> web.Application:
    """A Meilisearch whose tasks stay ``processing`` forever."""

    async def enqueue(_r: web.Request) -> web.Response:
        return web.json_response({"taskUid": 1, "indexUid": "chunks", "status": "enqueued"}, status=202)

    async def task(_r: web.Request) -> web.Response:
        return web.json_response({"uid": 1, "status": "processing"})

    app = web.Application()
    app.router.add_post("/indexes", enqueue)
    app.router.add_get("/tasks/{uid}", task)
    return app


class TestMeiliOptions:
    def test_one_parser_for_lane_and_writer(self) -> None:
        """Defaults, the bearer header from ``api_key``, and the writer's own timeouts."""
        spec = LaneSpec(
            name="keyword",
            kind=LaneKind.KEYWORD,
            backend="meilisearch",
            options={"url": "http://m:7700/", "api_key": "k", "timeout_s": 2.0},
        )
        opts = mod.MeiliOptions.parse(spec)
        assert (opts.url, opts.index, dict(opts.headers)) == ("http://m:7700", "chunks", {"Authorization": "Bearer k"})
        assert (opts.timeout_s, opts.write_timeout_s, opts.task_timeout_s, opts.batch_size) == (2.0, 10.0, 60.0, 1000)

    def test_bad_option_names_its_key(self) -> None:
        """A wrong type is a ConfigError naming ``lanes.<name>.options.<key>``."""
        spec = LaneSpec(name="keyword", kind=LaneKind.KEYWORD, backend="meilisearch", options={"url": 7})
        with pytest.raises(ConfigError, match=r"lanes\.keyword\.options\.url"):
            mod.MeiliOptions.parse(spec)


def test_public_api() -> None:
    """The module exports the writer, its index settings, the shared options and the shared request."""
    assert set(mod.__all__) == {"INDEX_SETTINGS", "MeiliOptions", "MeilisearchWriter", "meili_request"}
