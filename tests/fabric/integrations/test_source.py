"""FabricSource: one engine or one service behind blocking and async search, and its event-loop rules."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fabric.client import FabricClient
from fabric.core.errors import FabricError, QueryError
from fabric.integrations.source import FabricSource, request_params
from tests.support.ingested import engine


def test_exactly_one_backend() -> None:
    with pytest.raises(FabricError, match="exactly one"):
        FabricSource()
    with pytest.raises(FabricError, match="exactly one"):
        FabricSource(base_url="http://x", client=FabricClient("http://y"))


def test_blocking_search_opens_and_closes_the_engine(fabric_home: Path) -> None:
    """An unopened engine is opened on the source's loop thread and closed by close()."""
    eng = engine(fabric_home)
    source = FabricSource(engine=eng)
    page = source.search("deployment strategy", limit=2)
    assert page.items[0].id == "e-42"
    assert eng.health()["open"] is True
    source.close()
    assert eng.health()["open"] is False
    bad = FabricSource(engine=engine(fabric_home))
    with pytest.raises(QueryError):
        bad.search("x", limit=0)
    bad.close()
    assert bad.engine is not None
    assert bad.engine.health()["open"] is False  # validation failed before the engine was opened


async def test_async_then_async_from_another_loop_is_refused(fabric_home: Path) -> None:
    """The source binds to the loop it first ran on; a blocking call from inside it would deadlock."""
    async with engine(fabric_home) as eng:
        source = FabricSource(engine=eng)
        assert (await source.asearch("bread", limit=1)).items[0].id == "e-7"
        with pytest.raises(FabricError, match="would deadlock"):
            source.search("bread")
        assert eng.health()["open"] is True  # a given, already open engine stays the caller's

        def elsewhere() -> None:
            with pytest.raises(FabricError, match="another event loop"):
                asyncio.run(source.asearch("bread"))

        await asyncio.to_thread(elsewhere)


def test_async_calls_hop_to_the_loop_thread(fabric_home: Path) -> None:
    """After a blocking call started the loop thread, async calls from any loop are served there."""
    source = FabricSource(engine=engine(fabric_home))
    try:
        first = source.search("flour and water", limit=3)
        second = asyncio.run(source.asearch("flour and water", limit=3))
    finally:
        source.close()
    assert [i.id for i in first.items] == [i.id for i in second.items]


def test_request_params_drop_unset() -> None:
    assert request_params(limit=3, weights=None, fusion="rrf", mode=None, lanes=("keyword",)) == {
        "limit": 3,
        "fusion": "rrf",
        "lanes": ["keyword"],
    }


class TestSourceConstructors:
    def test_each_constructor_hands_the_retriever_a_source_and_its_options(self, tmp_path) -> None:
        """from_settings, from_engine and from_url build the class with ``source=`` and pass the other options on."""
        from fabric.integrations.source import FabricSource, SourceConstructors
        from fabric.query.engine import Engine
        from fabric.settings import load_settings

        class Retriever(SourceConstructors):
            def __init__(self, *, source: FabricSource, limit: int | None = None) -> None:
                self.source, self.limit = source, limit

        settings = load_settings(env={"FABRIC_HOME": str(tmp_path)})
        built = [
            Retriever.from_settings(settings, limit=3),
            Retriever.from_engine(Engine(settings), limit=3),
            Retriever.from_url("http://127.0.0.1:9", limit=3),
        ]
        assert all(isinstance(r, Retriever) and isinstance(r.source, FabricSource) for r in built)
        assert [r.limit for r in built] == [3, 3, 3]
