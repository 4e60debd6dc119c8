"""ArangoGraphWriter (python-arango, off the loop) against a loopback ArangoDB stand-in."""

from __future__ import annotations

import pytest
import requests

import lanes.graph.arango.writer as mod
from fabric.core.chunks import ListableStore
from fabric.core.errors import ConfigError, IngestError, LaneRejected, LaneTimeout, LaneUnavailable
from fabric.core.models import LaneKind, LaneRequest
from lanes.base import LaneResources, LaneSpec
from lanes.graph._extract.chunk_graph import chunk_extraction
from lanes.graph._extract.entities import RuleExtractor
from lanes.graph.arango.lane import ArangoGraphLane
from lanes.server_records import chunk_key
from tests.lanes.graph.arango.test_lane import CHUNKS, _ingest
from tests.lanes.graph.fake_arango import FakeArango
from tests.support.embedded import chunk
from tests.support.http import serve
from tools.faultproxy import Fault, FaultProxy


def _writer(port: int, **opts: object) -> mod.ArangoGraphWriter:
    options = {"url": f"http://127.0.0.1:{port}", "write_timeout_s": 5, **opts}
    return mod.ArangoGraphWriter(
        LaneSpec(name="graph", kind=LaneKind.GRAPH, backend="arango", options=options), LaneResources()
    )


def _edges(fake: FakeArango) -> set[tuple[str, str, str]]:
    return {(r["head"], r["type"], r["tail"]) for r in fake.collections["relations"]["docs"].values()}


class TestArangoGraphWriter:
    async def test_collections_created_with_edge_types(self) -> None:
        """Ingest creates chunks/entities documents and relations/mentions edge collections."""
        fake = FakeArango()
        async with serve(fake.app()) as srv:
            await _ingest(srv.port)
        assert {n: c["type"] for n, c in fake.collections.items()} == {
            "chunks": 2,
            "entities": 2,
            "relations": 3,
            "mentions": 3,
        }

    async def test_database_created_once(self) -> None:
        """A missing database is created through _system, and not again on the next open."""
        fake = FakeArango()
        async with serve(fake.app()) as srv:
            await _ingest(srv.port)
            await _ingest(srv.port)
        assert fake.databases == ["_system", "fabric"]

    async def test_repeated_ingest_is_idempotent(self) -> None:
        """Deterministic keys and replace-on-insert: a second ingest changes no counts."""
        fake = FakeArango()
        async with serve(fake.app()) as srv:
            await _ingest(srv.port)
            counts = {n: len(c["docs"]) for n, c in fake.collections.items()}
            await _ingest(srv.port)
        assert {n: len(c["docs"]) for n, c in fake.collections.items()} == counts
        assert set(fake.collections["chunks"]["docs"]) == {chunk_key(c["id"]) for c in CHUNKS}

    async def test_delete_removes_chunk_and_its_edges(self) -> None:
        """Deleting a chunk removes it and the mention edges pointing at it."""
        fake = FakeArango()
        async with serve(fake.app()) as srv:
            writer = await _ingest(srv.port)
            await writer.delete(["d3#0"])
        mentions = fake.collections["mentions"]["docs"].values()
        assert all(not m["_to"].endswith(chunk_key("d3#0")) for m in mentions)
        assert len(fake.collections["chunks"]["docs"]) == 2


class TestListIds:
    async def test_ids_come_back_through_batched_cursors(self) -> None:
        """ids() reads every chunk id through an AQL cursor, one batch per request, and leaves no cursor open."""
        fake = FakeArango()
        async with serve(fake.app()) as srv:
            writer = await _ingest(srv.port)
            writer.id_batch = 2
            assert isinstance(writer, ListableStore)
            found = await writer.ids()
            await writer.aclose()
        assert found == {"d1#0", "d2#0", "d3#0"}
        assert fake.batches[-2:] == [2, 1]
        assert fake.cursors[-1]["batchSize"] == 2
        assert fake.open_cursors == {}

    async def test_ids_follow_deletes(self) -> None:
        """A deleted chunk is no longer listed; an empty database lists nothing."""
        fake = FakeArango()
        async with serve(fake.app()) as srv:
            writer = await _ingest(srv.port)
            await writer.delete(["d2#0"])
            after_delete = await writer.ids()
            await writer.delete(["d1#0", "d3#0"])
            empty = await writer.ids()
            await writer.aclose()
        assert (after_delete, empty) == ({"d1#0", "d3#0"}, set())

    async def test_listing_failure_is_an_ingest_error(self) -> None:
        """A server failure while listing is one IngestError naming the server, never a driver traceback."""
        fake = FakeArango()
        async with serve(fake.app()) as srv:
            writer = await _ingest(srv.port)
            fake.collections.pop("chunks")
            with pytest.raises(IngestError, match=r"arangodb http://127\.0\.0\.1:\d+: .*collection or view not found"):
                await writer.ids()
            await writer.aclose()


class TestSameGraphAsSqlite:
    async def test_verb_and_supplied_triples_stored(self) -> None:
        """The rule extractor's verb triples and the JSONL ``triples`` (aliased) become relation edges, exactly the
        extraction the SQLite graph writer stores."""
        doc = chunk(
            "v1",
            "Vitamin D reduces Fracture Risk in older adults.",
            title="Bones",
            metadata={"triples": [["Alpha Corp", "acquired", "Beta Labs"], ["ACME", "supplies", "Alpha Corp"]]},
        )
        fake = FakeArango()
        async with serve(fake.app()) as srv:
            writer = _writer(srv.port, aliases={"acme": "acme industries"})
            await writer.upsert([doc])
            stored = await writer.triples(["v1"])
            await writer.aclose()
        expected = chunk_extraction(doc, RuleExtractor({"acme": "acme industries"}), {})
        assert _edges(fake) == set(expected.relations)
        assert {("vitamin d", "reduce", "fracture risk"), ("alpha corp", "acquired", "beta labs")} <= _edges(fake)
        assert ("acme industries", "supplies", "alpha corp") in _edges(fake)
        assert stored == {"v1": set(expected.relations)}
        names = {e["name_norm"]: e["label"] for e in fake.collections["entities"]["docs"].values()}
        assert names["beta labs"] == "Beta Labs"

    async def test_directed_edge_runs_head_to_tail(self) -> None:
        """A passive sentence gives the edge from the agent: ``X is inhibited by Y`` is ``Y --inhibit--> X``."""
        fake = FakeArango()
        async with serve(fake.app()) as srv:
            writer = _writer(srv.port)
            await writer.upsert([chunk("p1", "Tumour Growth is inhibited by Compound K.")])
            await writer.aclose()
        (edge,) = [r for r in fake.collections["relations"]["docs"].values() if r["type"] == "inhibit"]
        assert (edge["head"], edge["tail"]) == ("compound k", "tumour growth")
        assert (edge["_from"], edge["_to"]) == (
            f"entities/{mod.entity_key('compound k')}",
            f"entities/{mod.entity_key('tumour growth')}",
        )

    async def test_rewrite_drops_stale_edges(self) -> None:
        """A chunk written again with other triples keeps no edge of the old version."""
        fake = FakeArango()
        async with serve(fake.app()) as srv:
            writer = _writer(srv.port)
            await writer.upsert([chunk("r1", "Plain text.", metadata={"triples": [["Alpha", "owns", "Beta"]]})])
            await writer.upsert([chunk("r1", "Plain text.", metadata={"triples": [["Alpha", "sold", "Beta"]]})])
            await writer.aclose()
        assert _edges(fake) == {("alpha", "sold", "beta")}


class TestSharedPieces:
    def test_options_parsed_once_for_lane_and_writer(self) -> None:
        """Defaults of the shared options, and a bad value naming its key."""
        opts = mod.ArangoOptions.parse(
            LaneSpec(name="graph", kind=LaneKind.GRAPH, backend="arango", options={"url": "http://a:8529"})
        )
        assert (opts.database, opts.username, opts.timeout_s, opts.write_timeout_s) == ("fabric", "root", 5.0, 30.0)
        bad = LaneSpec(name="graph", kind=LaneKind.GRAPH, backend="arango", options={"url": "u", "max_seeds": 0})
        with pytest.raises(ConfigError, match=r"lanes\.graph\.options\.max_seeds"):
            mod.ArangoOptions.parse(bad)

    def test_error_mapping(self) -> None:
        """Transport timeouts and connection failures map onto lane errors."""
        assert isinstance(mod.map_arango_error(requests.exceptions.ReadTimeout("t"), "g", "arango"), LaneTimeout)
        refused = mod.map_arango_error(requests.exceptions.ConnectionError("refused"), "g", "arango")
        assert isinstance(refused, LaneUnavailable)

    async def test_429_suspends_for_retry_after(self) -> None:
        """A 429 (here from the fault proxy in front of the stand-in) is LaneRejected carrying its Retry-After."""
        async with serve(FakeArango().app()) as srv:
            await (await _ingest(srv.port)).aclose()
            async with FaultProxy(f"http://127.0.0.1:{srv.port}") as proxy:
                proxy.arm(Fault.RATE_LIMITED, retry_after_s=42)
                lane = ArangoGraphLane(
                    LaneSpec(name="graph", kind=LaneKind.GRAPH, backend="arango", options={"url": proxy.url}),
                    LaneResources(),
                )
                with pytest.raises(LaneRejected) as caught:
                    await lane.search(LaneRequest(query="insulin"))
                await lane.aclose()
        assert caught.value.failure == "rate_limited"
        assert caught.value.suspend_s == 42.0


def test_public_api() -> None:
    """The module exports the writer and the pieces the lane shares with it."""
    assert set(mod.__all__) == {
        "COLLECTIONS",
        "ArangoGraphWriter",
        "ArangoOptions",
        "connect",
        "entity_key",
        "map_arango_error",
    }
