"""The server-store kinds of the fault matrix: real writers fill the stand-ins, real lanes read them."""

from __future__ import annotations

import bench.faults_stores as mod
from fabric.core.models import LaneRequest
from tests.support.http import guarded


class TestStores:
    async def test_qdrant_lane_reads_the_upstream(self) -> None:
        """Without a fault the Qdrant server lane finds the chunk sharing the query's words first."""
        async with mod.qdrant_upstream() as url, guarded(["127.0.0.1"]) as session:
            lane = mod.qdrant_lane(url, session)
            hits = await lane.search(LaneRequest(query=mod.QDRANT_QUERY, top_k=2))
            await lane.aclose()
        assert hits
        assert hits[0].text == "apple banana smoothie"

    async def test_arango_lane_reads_the_upstream(self) -> None:
        """Without a fault the ArangoDB lane reaches the chunks mentioning the query's entities."""
        async with mod.arango_upstream() as url, guarded(["127.0.0.1"]) as session:
            lane = mod.arango_lane(url, session)
            hits = await lane.search(LaneRequest(query=mod.ARANGO_QUERY, top_k=5))
            await lane.aclose()
        assert {h.doc_id for h in hits} >= {"d1", "d2"}


def test_public_api() -> None:
    """The module's public names."""
    assert set(mod.__all__) == {
        "ARANGO_QUERY",
        "QDRANT_QUERY",
        "arango_lane",
        "arango_upstream",
        "qdrant_lane",
        "qdrant_upstream",
    }
