"""ArangoGraphLane and ArangoWriter (python-arango, off the loop) against a loopback ArangoDB stand-in."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import lanes.graph.arango.lane as mod
from fabric.core.errors import LaneBadResponse, LaneRejected, LaneTimeout, LaneUnavailable
from fabric.core.models import BoundConstraints, LaneKind, LaneRequest
from fabric.core.tenants import tenant_home
from lanes.base import LaneResources, LaneSpec
from lanes.graph.arango.lane import SEARCH_AQL, ArangoGraphLane, query_terms
from lanes.graph.arango.writer import ArangoGraphWriter
from tests.lanes.graph.fake_arango import FakeArango
from tests.support.http import serve
from tests.support.tenants import own_ids, plain, search_as_each, write_as_each
from tools.faultproxy import Fault, FaultProxy

CHUNKS = [
    {
        "id": "d1#0",
        "doc_id": "d1",
        "title": "Insulin",
        "text": "Insulin regulates Glucose uptake.",
        "domain": "a.org",
        "published_at": datetime(2024, 1, 1, tzinfo=UTC),
    },
    {
        "id": "d2#0",
        "doc_id": "d2",
        "title": "Glucose",
        "text": "Glucose fuels the Brain.",
        "domain": "b.org",
        "published_at": datetime(2010, 1, 1, tzinfo=UTC),
    },
    {"id": "d3#0", "doc_id": "d3", "title": "Neurons", "text": "The Brain contains Neurons.", "domain": "c.org"},
]


def _lane(port: int, **opts: Any) -> ArangoGraphLane:
    spec = LaneSpec(
        name="graph", kind=LaneKind.GRAPH, backend="arango", options={"url": f"http://127.0.0.1:{port}", **opts}
    )
    return ArangoGraphLane(spec, LaneResources())


async def _ingest(port: int, password: str = "") -> ArangoGraphWriter:
    spec = LaneSpec(
        name="graph",
        kind=LaneKind.GRAPH,
        backend="arango",
        options={"url": f"http://127.0.0.1:{port}", "password": password, "write_timeout_s": 5},
    )
    writer = ArangoGraphWriter(spec, LaneResources())
    await writer.open()
    await writer.upsert(CHUNKS)
    return writer


class TestHelpers:
    def test_query_terms_are_ngrams(self) -> None:
        """Terms are the normalised 1- to 3-grams."""
        assert query_terms("Type 2 Diabetes") == ["2", "2 diabetes", "diabetes", "type", "type 2", "type 2 diabetes"]


class TestArangoGraphLane:
    async def test_traversal_reaches_related_chunks(self) -> None:
        """Depth 1 reaches chunks one relation away, scored below direct mentions, with graph_hops."""
        fake = FakeArango()
        async with serve(fake.app()) as srv:
            await _ingest(srv.port)
            hits = await _lane(srv.port).search(LaneRequest(query="insulin", constraints=BoundConstraints()))
        assert [(h.id, h.graph_hops) for h in hits] == [("d1#0", 0), ("d2#0", 1)]
        assert hits[0].score > hits[1].score

    async def test_depth_from_constraints(self) -> None:
        """search_depth=2 reaches two hops out."""
        fake = FakeArango()
        async with serve(fake.app()) as srv:
            await _ingest(srv.port)
            hits = await _lane(srv.port).search(
                LaneRequest(query="insulin", constraints=BoundConstraints(search_depth=2))
            )
        assert [h.id for h in hits] == ["d1#0", "d2#0", "d3#0"]

    async def test_bind_variables_only_and_max_runtime(self) -> None:
        """The query text is the constant; user text travels in bindVars; maxRuntime is set."""
        fake = FakeArango()
        async with serve(fake.app()) as srv:
            await _ingest(srv.port)
            await _lane(srv.port, max_runtime_s=1.5).search(LaneRequest(query='x" RETURN 1 //'))
        body = fake.cursors[-1]
        assert body["query"] == SEARCH_AQL
        assert 'x" return 1' not in body["query"].lower()
        assert (body["options"]["maxRuntime"], body["bindVars"]["terms"][0]) == (1.5, "1")

    async def test_date_and_site_filters(self) -> None:
        """Old dated chunks and other sites are filtered server-side."""
        fake = FakeArango()
        c = BoundConstraints(search_depth=2, date_from=datetime(2020, 1, 1, tzinfo=UTC), sites=("a.org", "c.org"))
        async with serve(fake.app()) as srv:
            await _ingest(srv.port)
            hits = await _lane(srv.port).search(LaneRequest(query="insulin", constraints=c))
        assert [h.id for h in hits] == ["d1#0", "d3#0"]

    async def test_missing_collections_unavailable(self) -> None:
        """Nothing ingested (collection not found, 1203) is LaneUnavailable."""
        fake = FakeArango()
        fake.databases.append("fabric")
        async with serve(fake.app()) as srv:
            with pytest.raises(LaneUnavailable, match="1203"):
                await _lane(srv.port).search(LaneRequest(query="insulin"))

    async def test_missing_database_unavailable(self) -> None:
        """A database never written (a tenant that ingested nothing yet: 1228) is LaneUnavailable too."""
        async with serve(FakeArango().app()) as srv:
            with pytest.raises(LaneUnavailable, match="1228"):
                await _lane(srv.port).search(LaneRequest(query="insulin"))

    async def test_bad_password_forbidden(self) -> None:
        """401 is a forbidden rejection."""
        fake = FakeArango(password="pw")
        async with serve(fake.app()) as srv:
            await _ingest(srv.port, password="pw")
            with pytest.raises(LaneRejected) as err:
                await _lane(srv.port, password="wrong").search(LaneRequest(query="insulin"))
        assert err.value.failure == "forbidden"

    async def test_max_runtime_kill_is_timeout(self) -> None:
        """A query killed at maxRuntime (410/1500) is LaneTimeout."""
        fake = FakeArango()
        async with serve(fake.app()) as srv:
            await _ingest(srv.port)
            fake.query_delay_s = 5
            with pytest.raises(LaneTimeout, match="killed"):
                await _lane(srv.port, max_runtime_s=0.1).search(LaneRequest(query="insulin"))

    async def test_hung_server_times_out(self) -> None:
        """A server that never answers fails at the driver timeout we set, not the driver's 60 s."""
        fake = FakeArango()
        async with serve(fake.app()) as srv:
            await _ingest(srv.port)
            fake.hang = True
            lane = _lane(srv.port, timeout_s=0.3)
            with pytest.raises(LaneTimeout):
                await lane.search(LaneRequest(query="insulin"))
            await lane.aclose()

    async def test_connection_refused_unavailable(self) -> None:
        """A closed port is LaneUnavailable (no driver retries)."""
        async with serve(FakeArango().app()) as srv:
            port = srv.port
        with pytest.raises(LaneUnavailable):
            await _lane(port).search(LaneRequest(query="insulin"))

    @pytest.mark.parametrize("fault", [Fault.MALFORMED, Fault.DEEP, Fault.OVERSIZED])
    async def test_unreadable_answer_is_bad_response(self, fault: Fault) -> None:
        """A 200 the driver cannot read (truncated JSON, JSON nested 100,000 deep, megabytes of padding where the
        cursor should be: the fault proxy in front of the stand-in) is LaneBadResponse, never an unmapped exception."""
        async with serve(FakeArango().app()) as srv:
            await _ingest(srv.port)
            async with FaultProxy(f"http://127.0.0.1:{srv.port}") as proxy:
                lane = ArangoGraphLane(
                    LaneSpec(name="graph", kind=LaneKind.GRAPH, backend="arango", options={"url": proxy.url}),
                    LaneResources(),
                )
                proxy.arm(fault)
                with pytest.raises(LaneBadResponse):
                    await lane.search(LaneRequest(query="insulin"))
                await lane.aclose()


def test_public_api() -> None:
    """The module exports the lane, its query, the term helper and the error mapper."""
    assert set(mod.__all__) == {"BACKEND", "SEARCH_AQL", "ArangoGraphLane", "query_terms"}


class TestTenants:
    async def test_each_tenant_has_its_own_database(self, tmp_path: Path) -> None:
        """Over real HTTP: ``default`` keeps the ``fabric`` database, other tenants get ``fabric__<tenant>``
        (created by their first write); each tenant's traversal runs in its database only."""
        fake = FakeArango()
        async with serve(fake.app()) as srv:
            aspec = LaneSpec(
                name="graph",
                kind=LaneKind.GRAPH,
                backend="arango",
                options={"url": f"http://127.0.0.1:{srv.port}", "write_timeout_s": 5},
            )

            def of(tenant: str) -> LaneResources:
                return LaneResources(home=tenant_home(tmp_path, tenant), tenant=tenant)

            await write_as_each(lambda r: ArangoGraphWriter(aspec, r), of, plain)
            assert await search_as_each(lambda r: ArangoGraphLane(aspec, r), of) == own_ids()
        assert fake.databases == ["_system", "fabric", "fabric__acme", "fabric__beta"]
        assert len(fake.by_database["fabric__acme"]["chunks"]["docs"]) == 2
