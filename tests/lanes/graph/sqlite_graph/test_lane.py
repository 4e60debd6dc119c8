"""Tests of entity extraction/normalisation, the SQLite graph store and the graph lane."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

import lanes.graph.sqlite_graph.lane as mod
from fabric.core.errors import ConfigError
from fabric.core.models import BoundConstraints, LaneKind, LaneRequest
from lanes.base import LaneResources
from lanes.graph._extract.entities import Extraction, RuleExtractor, normalize_entity
from lanes.graph.sqlite_graph.lane import SqliteGraphLane
from lanes.graph.sqlite_graph.writer import SqliteGraphWriter
from tests.support.embedded import chunk, resources, spec
from tests.support.tenants import own_ids, plain, search_as_each, write_as_each

CORPUS = [
    chunk("c1", "Marie Curie worked with Pierre Curie in Paris."),
    chunk("c2", "Pierre Curie studied piezoelectricity."),
    chunk("c3", "The United States launched Apollo."),
    chunk("c4", "Bananas are yellow."),
]


async def _store(home: Path, chunks=CORPUS, **options) -> None:
    store = SqliteGraphWriter(spec(LaneKind.GRAPH, "sqlite_graph", **options), resources(home))
    await store.open()
    await store.upsert(chunks)
    await store.aclose()


class TestNormalisation:
    def test_lowercase_punctuation_whitespace(self) -> None:
        """Lowercase, punctuation stripped, whitespace collapsed."""
        assert normalize_entity("  Marie   CURIE, ") == "marie curie"

    def test_alias_table_applies(self) -> None:
        """Aliases map surface forms, before or after stripping punctuation."""
        aliases = {"u.s.": "united states", "us": "united states"}
        assert normalize_entity("U.S.", aliases) == "united states"
        assert normalize_entity("US", aliases) == "united states"


class TestRuleExtractor:
    def test_capitalised_spans_acronyms_and_identifiers(self) -> None:
        """Capitalised spans, acronyms, commit SHAs and error codes are entities."""
        ex = RuleExtractor().extract("We chose Qdrant Local Mode and RRF in commit 3f9c2ab after error E1042.")
        assert {"qdrant local mode", "rrf", "3f9c2ab", "e1042"} <= set(ex.entities)

    def test_cooccurrence_relations_within_a_sentence(self) -> None:
        """Entities of one sentence are linked; entities of different sentences are not."""
        ex = RuleExtractor().extract("Marie Curie met Pierre Curie. Albert Einstein wrote.")
        assert ("marie curie", "co_occurs", "pierre curie") in ex.relations
        assert not any("albert einstein" in (s, o) and "marie curie" in (s, o) for s, _, o in ex.relations)


class TestLane:
    async def test_direct_entity_match_has_zero_hops(self, tmp_path: Path) -> None:
        """Chunks mentioning a query entity come back with graph_hops 0 and the match rate."""
        await _store(tmp_path)
        async with SqliteGraphLane(spec(LaneKind.GRAPH, "sqlite_graph"), resources(tmp_path)) as lane:
            hits = await lane.search(LaneRequest(query="What did Marie Curie do?", top_k=5))
        assert hits[0].id == "c1"
        assert hits[0].graph_hops == 0
        assert hits[0].metadata["entity_match_rate"] == 1.0
        assert "marie curie" in hits[0].metadata["matched_entities"]

    async def test_one_hop_reaches_related_chunks_with_decay(self, tmp_path: Path) -> None:
        """A chunk linked only through a related entity is reached at 1 hop, scored below direct matches."""
        await _store(tmp_path)
        async with SqliteGraphLane(spec(LaneKind.GRAPH, "sqlite_graph"), resources(tmp_path)) as lane:
            hits = await lane.search(LaneRequest(query="Marie Curie", top_k=5))
        by_id = {h.id: h for h in hits}
        assert by_id["c2"].graph_hops == 1
        assert by_id["c2"].score < by_id["c1"].score
        assert "c4" not in by_id

    async def test_a_neighbour_most_chunks_mention_adds_nothing_a_query_entity_still_counts(
        self, tmp_path: Path
    ) -> None:
        """Paris is Marie Curie's neighbour and is mentioned in 60 of 61 chunks (over 4 % and 50 chunks): reached
        through Marie Curie it scores none of them; asked for by name, it does. With the cut raised (option
        ``neighbour_max_df``), the neighbour counts again."""
        common = [chunk(f"p{i}", f"Paris hosted meeting {i}.") for i in range(59)]
        await _store(tmp_path, [chunk("c1", "Marie Curie lived in Paris."), *common, chunk("x", "Bananas.")])
        async with SqliteGraphLane(spec(LaneKind.GRAPH, "sqlite_graph"), resources(tmp_path)) as lane:
            via_neighbour = {h.id for h in await lane.search(LaneRequest(query="Marie Curie", top_k=100))}
            by_name = {h.id for h in await lane.search(LaneRequest(query="Paris", top_k=100))}
        assert via_neighbour == {"c1"}
        assert by_name == {"c1"} | {c.id for c in common}
        wide = spec(LaneKind.GRAPH, "sqlite_graph", neighbour_max_df=1.0)
        async with SqliteGraphLane(wide, resources(tmp_path)) as lane:
            widened = {h.id for h in await lane.search(LaneRequest(query="Marie Curie", top_k=100))}
        assert widened == {"c1"} | {c.id for c in common}

    async def test_query_years_put_dated_chunks_outside_them_last(self, tmp_path: Path) -> None:
        """Inferred years rank an undated chunk first, and a chunk published outside them still comes back."""
        old = datetime(1911, 5, 1, tzinfo=UTC)
        docs = [chunk("a-old", "Marie Curie lectured.", published_at=old), chunk("b-new", "Marie Curie.")]
        await _store(tmp_path, docs)
        req = LaneRequest(query="Marie Curie", top_k=5, constraints=BoundConstraints(query_years=(1979, 1979)))
        async with SqliteGraphLane(spec(LaneKind.GRAPH, "sqlite_graph"), resources(tmp_path)) as lane:
            plain = [h.id for h in await lane.search(LaneRequest(query="Marie Curie", top_k=5))]
            soft = [h.id for h in await lane.search(req)]
        assert (plain, soft) == (["a-old", "b-new"], ["b-new", "a-old"])

    async def test_hard_date_range_still_filters(self, tmp_path: Path) -> None:
        """An explicit date range (the user's time_range) stays a hard filter: undated chunks are excluded."""
        docs = [chunk("old", "Marie Curie lectured in 1911."), chunk("new", "Marie Curie.")]
        await _store(tmp_path, docs)
        c = BoundConstraints(date_from=datetime(1911, 1, 1, tzinfo=UTC), date_to=datetime(1911, 12, 31, tzinfo=UTC))
        async with SqliteGraphLane(spec(LaneKind.GRAPH, "sqlite_graph"), resources(tmp_path)) as lane:
            assert [h.id for h in await lane.search(LaneRequest(query="Marie Curie", top_k=5, constraints=c))] == [
                "old"
            ]

    async def test_depth_zero_does_not_expand(self, tmp_path: Path) -> None:
        """search_depth 0 returns only chunks mentioning the query entities."""
        await _store(tmp_path)
        req = LaneRequest(query="Marie Curie", top_k=5, constraints=BoundConstraints(search_depth=0))
        async with SqliteGraphLane(spec(LaneKind.GRAPH, "sqlite_graph"), resources(tmp_path)) as lane:
            assert [h.id for h in await lane.search(req)] == ["c1"]

    async def test_alias_file_maps_query_entities(self, tmp_path: Path) -> None:
        """An aliases file lets 'U.S.' in a query match 'United States' in the corpus."""
        aliases = tmp_path / "aliases.toml"
        aliases.write_text('"u.s." = "united states"\n')
        await _store(tmp_path, aliases_file=str(aliases))
        lane_spec = spec(LaneKind.GRAPH, "sqlite_graph", aliases_file=str(aliases))
        async with SqliteGraphLane(lane_spec, resources(tmp_path)) as lane:
            hits = await lane.search(LaneRequest(query="U.S. space program", top_k=5))
        assert hits[0].id == "c3"

    async def test_bad_aliases_file_is_a_config_error(self, tmp_path: Path) -> None:
        """A missing aliases file raises ConfigError naming the option."""
        lane = SqliteGraphLane(
            spec(LaneKind.GRAPH, "sqlite_graph", aliases_file=str(tmp_path / "no.toml")), resources(tmp_path)
        )
        with pytest.raises(ConfigError, match="aliases_file"):
            await lane.open()

    async def test_no_entity_match_returns_nothing(self, tmp_path: Path) -> None:
        """A query naming no known entity returns no hits."""
        await _store(tmp_path)
        async with SqliteGraphLane(spec(LaneKind.GRAPH, "sqlite_graph"), resources(tmp_path)) as lane:
            assert await lane.search(LaneRequest(query="quantum chromodynamics", top_k=5)) == []

    async def test_delete_removes_edges_and_orphans(self, tmp_path: Path) -> None:
        """Deleting a chunk removes its provenance edges and entities nothing mentions any more."""
        await _store(tmp_path)
        store = SqliteGraphWriter(spec(LaneKind.GRAPH, "sqlite_graph"), resources(tmp_path))
        await store.delete(["c3"])
        left = await store.db.run(
            lambda conn: conn.execute("SELECT COUNT(*) FROM entities WHERE norm = 'apollo'").fetchone()[0]
        )
        await store.aclose()
        assert left == 0
        async with SqliteGraphLane(spec(LaneKind.GRAPH, "sqlite_graph"), resources(tmp_path)) as lane:
            assert await lane.search(LaneRequest(query="United States", top_k=5)) == []

    async def test_custom_extractor_plugs_in(self, tmp_path: Path) -> None:
        """Any EntityExtractor can replace the rule extractor in store and lane."""

        class Fixed:
            def extract(self, text: str) -> Extraction:
                return Extraction(entities={"banana": "banana"} if "anana" in text else {})

        store = SqliteGraphWriter(spec(LaneKind.GRAPH, "sqlite_graph"), resources(tmp_path), extractor=Fixed())
        await store.upsert(CORPUS)
        await store.aclose()
        lane = SqliteGraphLane(spec(LaneKind.GRAPH, "sqlite_graph"), resources(tmp_path), extractor=Fixed())
        async with lane:
            assert [h.id for h in await lane.search(LaneRequest(query="bananas", top_k=5))] == ["c4"]


def test_public_api() -> None:
    """The module exports exactly the lane."""
    assert mod.__all__ == ["BACKEND", "SqliteGraphLane"]


class TestDirectedRelations:
    """Seed 004 §4A: triples given at ingest are directed edges; the lane follows them outgoing only."""

    CHUNKS = (
        chunk("c1", "Alpha Corp reported results.", metadata={"triples": [["Alpha Corp", "acquired", "Beta Labs"]]}),
        chunk("c2", "Beta Labs builds sensors."),
        chunk("c3", "Gamma Inc makes chips.", metadata={"triples": [["Gamma Inc", "supplies", "Beta Labs"]]}),
        chunk("c4", "Gamma Inc opened a plant."),
    )

    async def test_supplied_triples_stored_as_directed_edges(self, tmp_path: Path) -> None:
        import sqlite3

        await _store(tmp_path, self.CHUNKS)
        conn = sqlite3.connect(tmp_path / "graph.sqlite")
        rows = conn.execute(
            "SELECT s.norm, r.predicate, o.norm, r.chunk_id FROM relations r JOIN entities s ON s.id = r.subject_id "
            "JOIN entities o ON o.id = r.object_id WHERE r.predicate != 'co_occurs' ORDER BY r.chunk_id"
        ).fetchall()
        conn.close()
        assert rows == [("alpha corp", "acquired", "beta labs", "c1"), ("gamma inc", "supplies", "beta labs", "c3")]

    async def test_outgoing_edges_followed_incoming_not(self, tmp_path: Path) -> None:
        """Gamma Inc → Beta Labs reaches Beta Labs' chunk at 1 hop; from Beta Labs, Gamma Inc's chunk is not reached."""
        await _store(tmp_path, self.CHUNKS)
        async with SqliteGraphLane(spec(LaneKind.GRAPH, "sqlite_graph"), resources(tmp_path)) as lane:
            from_gamma = {h.id: h for h in await lane.search(LaneRequest(query="Gamma Inc", top_k=10))}
            from_beta = {h.id: h for h in await lane.search(LaneRequest(query="Beta Labs", top_k=10))}
        assert from_gamma["c2"].graph_hops == 1
        assert from_gamma["c4"].graph_hops == 0
        assert {"c1", "c2", "c3"} <= set(from_beta)
        assert "c4" not in from_beta


class TestTenants:
    async def test_each_tenant_searches_only_its_own_graph(self, tmp_path: Path) -> None:
        """Entities and edges of one tenant never reach another's traversal (one graph file per tenant)."""
        gspec = spec(LaneKind.GRAPH, "sqlite_graph")

        def of(tenant: str) -> LaneResources:
            return resources(tmp_path, tenant=tenant)

        await write_as_each(lambda r: SqliteGraphWriter(gspec, r), of, plain)
        assert await search_as_each(lambda r: SqliteGraphLane(gspec, r), of) == own_ids()
        assert (tmp_path / "tenants" / "beta" / "graph.sqlite").is_file()
