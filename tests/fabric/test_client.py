"""The typed async HTTP client against a live service on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric.client import FabricClient, FabricClientError, SearchPage
from fabric.core.errors import QueryError
from fabric.query.validation import parse_request
from tests.support.ingested import engine


async def test_search_is_typed_and_matches_the_engine(service_url: str, fabric_home: Path) -> None:
    """Typed page: ids, order, total and score ledger equal an in-process search over the same stores."""
    async with FabricClient(service_url) as client:
        page = await client.search("deployment strategy", limit=3, weights={"semantic": 2})
    async with engine(fabric_home) as eng:
        direct = await eng.search(
            parse_request({"query": "deployment strategy", "limit": 3, "weights": {"semantic": 2}}, eng.settings)
        )
    assert isinstance(page, SearchPage)
    assert [it.id for it in page.items] == [it.id for it in direct.items]
    assert page.total == direct.total
    first = page.items[0]
    assert first.score_total == round(direct.items[0].score_total, 6)
    assert sum(first.contributions.values()) == pytest.approx(first.score_total, abs=1e-5)
    assert first.text == direct.items[0].hit.text
    assert page.lane_status() == {name: out.status.value for name, out in direct.lanes.items()}
    assert page.lane_status()["vector"] == "success"  # the default route (auto) runs Dense: keyword + vector
    vector = page.lanes["vector"]  # the requested weight, times the lane's confidence in its top hit
    assert vector["weight"] == pytest.approx(2.0 * vector["confidence"], abs=1e-3)
    assert vector["confidence"] == round(direct.lanes["vector"].confidence, 4)


async def test_paging_with_cursor(service_url: str) -> None:
    async with FabricClient(service_url) as client:
        first = await client.search("release", limit=2)
        second = await client.search("release", limit=2, cursor=first.next_cursor)
    assert first.next_cursor
    assert not {i.id for i in first.items} & {i.id for i in second.items}
    assert first.total == second.total


async def test_validation_errors_are_query_errors(service_url: str) -> None:
    """A 400 comes back as the engine's QueryError, field and message intact."""
    async with FabricClient(service_url) as client:
        with pytest.raises(QueryError) as err:
            await client.search("x", limit=0)
        assert (err.value.field, err.value.message) == ("limit", "must be >= 1, got 0")
        with pytest.raises(QueryError) as err:
            await client.search("x", weights={"nope": 1})
        assert err.value.field == "weights"


async def test_ingest_and_task(service_url: str) -> None:
    async with FabricClient(service_url) as client:
        done = await client.ingest([{"id": "n-1", "title": "new", "text": "Brand new entry about kites."}])
        assert done["status"] == "succeeded"
        again = await client.task(done["task_id"])
        assert again["report"]["created"] == 1
        page = await client.search("kites", limit=1)
        assert page.items[0].id == "n-1"
        with pytest.raises(FabricClientError) as err:
            await client.task("nope")
        assert err.value.status == 404


async def test_unreachable_service_is_a_client_error() -> None:
    async with FabricClient("http://127.0.0.1:9", timeout_s=5) as client:
        with pytest.raises(FabricClientError, match="POST /v1/search"):
            await client.search("x")


async def test_page_from_result_equals_page_from_json(fabric_home: Path) -> None:
    """An in-process page reads the same as the result JSON's (the adapters rely on it)."""
    async with engine(fabric_home) as eng:
        result = await eng.search(parse_request({"query": "release", "limit": 3}, eng.settings))
    direct, via_json = SearchPage.from_result(result), SearchPage.from_dict(result.to_dict())
    assert direct.items == via_json.items
    for field in ("query", "total", "next_cursor", "partial", "lanes", "timings", "trace_id"):
        assert getattr(direct, field) == getattr(via_json, field), field
