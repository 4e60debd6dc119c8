"""Integration tests against live services (the compose stack): run by ``make compose-test``.

Each test needs its ``FABRIC_*_URL`` variable and is skipped with a clear reason otherwise. They write to a
throw-away Meilisearch index and to the ArangoDB collections of the configured database.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import aiohttp
import pytest
from yarl import URL

from fabric.core.chunks import Chunk
from fabric.core.models import LaneKind, LaneRequest
from fabric.net.httpclient import AllowList, HostRule, create_session, fetch
from lanes.base import LaneResources, LaneSpec

pytestmark = pytest.mark.integration

CHUNKS = [
    Chunk(
        id="it1#0",
        doc_id="it1",
        chunk_id="0",
        title="Insulin and Glucose",
        text="Insulin regulates Glucose uptake in muscle.",
    ),
    Chunk(id="it2#0", doc_id="it2", chunk_id="0", title="Glucose and the Brain", text="Glucose fuels the Brain."),
]


def _env(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        pytest.skip(f"{name} is not set: start the stack (make compose-up) and run make compose-test")
    return value


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    """A guarded session allowing the hosts of every FABRIC_*_URL that is set."""
    hosts = [
        URL(os.environ[v]).host or ""
        for v in ("FABRIC_QDRANT_URL", "FABRIC_MEILI_URL", "FABRIC_SEARXNG_URL")
        if os.environ.get(v)
    ]
    s = create_session(AllowList.of(HostRule(h, private_ok=True) for h in hosts))
    yield s
    await s.close()


async def test_qdrant_ready(session: aiohttp.ClientSession) -> None:
    """Qdrant answers /readyz."""
    url = _env("FABRIC_QDRANT_URL")
    resp = await fetch(session, "GET", f"{url.rstrip('/')}/readyz", timeout_s=5)
    assert resp.status == 200


async def test_meilisearch_ingest_then_search(session: aiohttp.ClientSession) -> None:
    """Chunks written by MeilisearchWriter are found by MeilisearchKeywordLane with a ranking score."""
    from lanes.keyword.meilisearch.lane import MeilisearchKeywordLane
    from lanes.keyword.meilisearch.writer import MeilisearchWriter

    options = {
        "url": _env("FABRIC_MEILI_URL"),
        "api_key": os.environ.get("FABRIC_MEILI_KEY", ""),
        "index": f"it_{uuid.uuid4().hex[:8]}",
    }
    spec = LaneSpec(name="keyword", kind=LaneKind.KEYWORD, backend="meilisearch", options=options)
    resources = LaneResources(http=session)
    store = MeilisearchWriter(spec, resources)
    await store.upsert(CHUNKS)
    hits = await MeilisearchKeywordLane(spec, resources).search(LaneRequest(query="insulin"))
    await store.delete([c.id for c in CHUNKS])
    assert hits[0].id == "it1#0"
    assert 0 < hits[0].score <= 1


async def test_arango_ingest_then_traverse() -> None:
    """Chunks written by ArangoGraphWriter are reached by ArangoGraphLane's traversal."""
    from lanes.graph.arango.lane import ArangoGraphLane
    from lanes.graph.arango.writer import ArangoGraphWriter

    options = {
        "url": _env("FABRIC_ARANGO_URL"),
        "password": os.environ.get("FABRIC_ARANGO_PASSWORD", ""),
        "database": "fabric",
    }
    spec = LaneSpec(name="graph", kind=LaneKind.GRAPH, backend="arango", options=options)
    store = ArangoGraphWriter(spec, LaneResources())
    await store.upsert(CHUNKS)
    lane = ArangoGraphLane(spec, LaneResources())
    hits = await lane.search(LaneRequest(query="insulin"))
    await store.delete([c.id for c in CHUNKS])
    await lane.aclose()
    await store.aclose()
    assert [h.id for h in hits][:2] == ["it1#0", "it2#0"]


async def test_searxng_json_api(session: aiohttp.ClientSession) -> None:
    """SearXNG answers the JSON API (format enabled) and the lane converts it."""
    from lanes.web.searxng import SearxngWebLane

    spec = LaneSpec(name="web", kind=LaneKind.WEB, backend="searxng", options={"url": _env("FABRIC_SEARXNG_URL")})
    hits = await SearxngWebLane(spec, LaneResources(http=session)).search(LaneRequest(query="python asyncio"))
    assert all(h.url.startswith("http") for h in hits)
