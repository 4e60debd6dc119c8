"""Tests of the SQLite FTS5 keyword store and lane."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

import lanes.keyword.sqlite_fts.lane as mod
from fabric.core.models import BoundConstraints, LaneKind, LaneRequest, Trust
from lanes.base import LaneResources
from lanes.keyword.sqlite_fts.lane import SqliteFtsKeywordLane, expression_parts, match_expression, query_terms
from lanes.keyword.sqlite_fts.writer import SqliteFtsWriter
from tests.support.embedded import chunk, resources, spec
from tests.support.tenants import own_ids, plain, search_as_each, write_as_each

CORPUS = [
    chunk("a", "Reciprocal rank fusion merges ranked lists from several retrievers.", title="Fusion notes"),
    chunk("b", "The fusion reactor runs hot.", title="Reactor"),
    chunk("c", "Runners were running quickly during the marathon.", title="Sport"),
    chunk("d", "Qdrant stores vectors; error QD-LOCK-01 means the folder is locked.", title="Qdrant"),
    chunk("e", "Notes from 2019 about rank fusion.", title="Old", published_at=datetime(2019, 5, 1, tzinfo=UTC)),
    chunk("f", "Rank fusion on example.org pages.", title="Web", url="https://docs.example.org/x"),
    chunk("g", "Trusted operator notes on rank fusion.", title="Ops", trust=Trust.TRUSTED),
]


@pytest.fixture
async def lane(tmp_path: Path):
    """A keyword lane over a store holding CORPUS."""
    store = SqliteFtsWriter(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path))
    await store.open()
    await store.upsert(CORPUS)
    await store.aclose()
    lane = SqliteFtsKeywordLane(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path))
    async with lane:
        assert lane.memory is not None
        lane.memory.wait()  # unfiltered queries are ranked in the in-memory copy (tests/.../test_memory_index.py)
        yield lane


def ids(hits) -> list[str]:
    return [h.id for h in hits]


class TestMatchExpression:
    def test_terms_are_quoted_and_ored(self) -> None:
        """Each word token becomes a quoted term joined by OR."""
        assert match_expression("rank fusion") == '("rank" OR "fusion")'

    def test_phrases_are_boosted_not_required(self) -> None:
        """A phrase joins the OR as a quoted FTS5 phrase, ``phrase_boost`` times, never ANDed."""
        assert match_expression("x", ("rank fusion",)) == '("x" OR "rank fusion" OR "rank fusion")'
        assert match_expression("x", ("rank fusion",), phrase_boost=1) == '("x" OR "rank fusion")'

    def test_one_word_phrase_adds_nothing(self) -> None:
        """A quoted single word (``their "distances"``) is already a query term: no extra clause."""
        assert match_expression("their distances", ("distances",)) == '("distances")'

    def test_stopword_only_phrase_adds_nothing(self) -> None:
        """A quoted phrase of function words only would match nearly every chunk: it is left out."""
        assert match_expression("rank", ("of the",)) == '("rank")'

    def test_no_tokens_gives_none(self) -> None:
        """A query of punctuation only has no expression."""
        assert match_expression('"()*^:') is None

    def test_stopwords_are_left_out(self) -> None:
        """Function words do not reach the OR query."""
        assert match_expression("What is the rank of a fusion?") == '("rank" OR "fusion")'

    def test_a_query_of_stopwords_keeps_its_words(self) -> None:
        """With nothing but stopwords the words are searched as given rather than nothing."""
        assert query_terms("What is it") == ["what", "is", "it"]

    def test_repeated_terms_stay_repeated(self) -> None:
        """A term said twice is two phrases, so bm25() counts it twice (query term frequency)."""
        assert query_terms("titles of articles and the titles") == ["titles", "articles", "titles"]
        assert match_expression("fusion rank fusion") == '("fusion" OR "rank" OR "fusion")'

    def test_terms_are_capped(self) -> None:
        """At most 64 terms reach the expression."""
        assert len(query_terms(" ".join(f"w{i}" for i in range(100)))) == 64


class TestSearch:
    async def test_bm25_ranks_matching_chunks(self, lane: SqliteFtsKeywordLane) -> None:
        """Chunks matching more query terms rank first, with 1-based ranks and positive scores."""
        hits = await lane.search(LaneRequest(query="reciprocal rank fusion retrievers", top_k=3))
        assert hits[0].id == "a"
        assert [h.rank for h in hits] == [1, 2, 3]
        assert all(h.score > 0 for h in hits)

    async def test_title_weighs_above_body(self, lane: SqliteFtsKeywordLane) -> None:
        """A term in the title outranks the same term in a body of similar length."""
        hits = await lane.search(LaneRequest(query="reactor", top_k=5))
        assert ids(hits) == ["b"]
        hits = await lane.search(LaneRequest(query="qdrant", top_k=5))
        assert ids(hits) == ["d"]

    async def test_porter_stemming_matches_inflections(self, lane: SqliteFtsKeywordLane) -> None:
        """'runs' finds 'running' and 'runners' through the porter stemmer."""
        assert "c" in ids(await lane.search(LaneRequest(query="run", top_k=5)))

    @pytest.mark.parametrize(
        "query",
        [
            '"unbalanced',
            "rank NEAR(fusion, 2)",
            "fus*",
            "^rank",
            "title:fusion",
            "((rank fusion",
            "rank) OR (",
            "AND OR NOT",
            "- + : {} [] ; '",
        ],
    )
    async def test_fts_syntax_is_never_injected(self, lane: SqliteFtsKeywordLane, query: str) -> None:
        """FTS5 operators in user text are searched as plain words, never parsed as syntax."""
        hits = await lane.search(LaneRequest(query=query, top_k=5))
        assert isinstance(hits, list)

    async def test_column_filter_text_is_a_plain_word(self, lane: SqliteFtsKeywordLane) -> None:
        """'title:reactor' searches the words title and reactor instead of filtering a column."""
        assert ids(await lane.search(LaneRequest(query="title:reactor", top_k=5))) == ["b"]

    async def test_phrase_ranks_its_chunks_first(self, lane: SqliteFtsKeywordLane) -> None:
        """Chunks with the phrase verbatim outrank one that has only the term, which still comes back."""
        req = LaneRequest(query="fusion", top_k=10, constraints=BoundConstraints(phrases=("rank fusion",)))
        found = ids(await lane.search(req))
        assert found[-1] == "b"
        assert set(found) == {"a", "b", "e", "f", "g"}

    async def test_query_years_put_dated_chunks_outside_them_last(self, lane: SqliteFtsKeywordLane) -> None:
        """Inferred years keep undated chunks; a chunk dated outside them comes after every other match."""
        c = BoundConstraints(query_years=(2021, 2021))
        found = ids(await lane.search(LaneRequest(query="rank fusion", top_k=10, constraints=c)))
        assert found[-1] == "e"
        assert set(found) == {"a", "b", "e", "f", "g"}

    async def test_filled_chunks_never_outscore_preferred_ones(self, lane: SqliteFtsKeywordLane) -> None:
        """After the deep fill scores do not increase down the ranking, so score fusion keeps the order."""
        c = BoundConstraints(query_years=(2021, 2021))
        hits = await lane.search(LaneRequest(query="notes 2019 rank fusion", top_k=10, constraints=c))
        assert hits[-1].id == "e"
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)

    async def test_query_years_never_empty_the_answer(self, lane: SqliteFtsKeywordLane) -> None:
        """When only chunks dated outside the inferred years match, they are still returned (deep fill)."""
        c = BoundConstraints(query_years=(1979, 1979))
        assert ids(await lane.search(LaneRequest(query="2019", top_k=10, constraints=c))) == ["e"]

    async def test_query_years_ignore_years_a_text_only_mentions(self, tmp_path: Path) -> None:
        """A year an undated chunk mentions does not date it: with other years inferred its rank is kept."""
        store = SqliteFtsWriter(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path / "m"))
        await store.open()
        await store.upsert([chunk("m", "Online searches in 1975 grew."), chunk("n", "Online searches grew fast.")])
        await store.aclose()
        c = BoundConstraints(query_years=(1979, 1979))
        async with SqliteFtsKeywordLane(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path / "m")) as lane:
            plain = ids(await lane.search(LaneRequest(query="online searches 1975", top_k=5)))
            soft = ids(await lane.search(LaneRequest(query="online searches 1975", top_k=5, constraints=c)))
        assert plain == soft == ["m", "n"]

    async def test_query_years_favour_chunks_dated_inside(self, lane: SqliteFtsKeywordLane) -> None:
        """A chunk dated inside the inferred years stays among the preferred ones."""
        c = BoundConstraints(query_years=(2019, 2019))
        plain = ids(await lane.search(LaneRequest(query="rank fusion", top_k=10)))
        assert ids(await lane.search(LaneRequest(query="rank fusion", top_k=10, constraints=c))) == plain

    async def test_date_range_filters(self, lane: SqliteFtsKeywordLane) -> None:
        """A date range keeps only chunks published or mentioning a year in it."""
        c = BoundConstraints(date_from=datetime(2019, 1, 1, tzinfo=UTC), date_to=datetime(2019, 12, 31, tzinfo=UTC))
        assert ids(await lane.search(LaneRequest(query="rank fusion", top_k=10, constraints=c))) == ["e"]

    async def test_site_filter_matches_subdomains(self, lane: SqliteFtsKeywordLane) -> None:
        """site: constraints keep chunks from the domain and its sub-domains."""
        c = BoundConstraints(sites=("example.org",))
        assert ids(await lane.search(LaneRequest(query="rank fusion", top_k=10, constraints=c))) == ["f"]

    async def test_trust_option_filters(self, tmp_path: Path, lane: SqliteFtsKeywordLane) -> None:
        """options.trust = trusted keeps only trusted chunks."""
        trusted = SqliteFtsKeywordLane(spec(LaneKind.KEYWORD, "sqlite_fts", trust="trusted"), resources(tmp_path))
        async with trusted:
            assert ids(await trusted.search(LaneRequest(query="rank fusion", top_k=10))) == ["g"]

    async def test_hits_carry_provenance(self, lane: SqliteFtsKeywordLane) -> None:
        """Hits carry doc id, source, trust, quality and years from the store."""
        hit = (await lane.search(LaneRequest(query="2019 notes", top_k=1)))[0]
        assert hit.id == "e"
        assert hit.doc_id == "e"
        assert hit.source_ref == "test"
        assert hit.published_at == datetime(2019, 5, 1, tzinfo=UTC)
        assert hit.metadata["years"] == [2019]
        assert hit.quality is not None

    async def test_hits_carry_ingest_features(self, lane: SqliteFtsKeywordLane) -> None:
        """Hits carry the SimHash, URL key and title key stored at ingest, unchanged (unsigned SimHash)."""
        hits = await lane.search(LaneRequest(query="rank fusion", top_k=10))
        stored = {c.id: (c.simhash, c.url_key, c.title_key) for c in CORPUS}
        assert {h.id: (h.simhash, h.url_key, h.title_key) for h in hits} == {h.id: stored[h.id] for h in hits}
        assert all(h.simhash is not None for h in hits)
        assert next(h for h in hits if h.id == "f").url_key == "docs.example.org/x"

    async def test_empty_query_returns_nothing(self, lane: SqliteFtsKeywordLane) -> None:
        """A query without word tokens returns no hits."""
        assert await lane.search(LaneRequest(query="?!", top_k=5)) == []

    @pytest.mark.parametrize("top_k", [1, 3, 50])
    @pytest.mark.parametrize("in_memory", [False, True])
    async def test_unfiltered_ranking_equals_the_joined_one(
        self, lane: SqliteFtsKeywordLane, top_k: int, in_memory: bool
    ) -> None:
        """Ranking in the index alone (or its in-memory copy) and reading the top rows' payload afterwards gives
        the same rows, scores and order as the join the filtered queries use (an always true condition forces
        the join)."""
        query = "rank fusion notes reactor runners"
        expr = match_expression(query)
        assert expr is not None
        terms = expression_parts(query) if in_memory else None
        assert lane.memory is not None
        assert lane.memory.snapshot() is not None  # current: the in-memory path really ranks when given terms
        split = await lane.db.run(
            lambda conn: lane._ranked(conn, expr, "1", [], top_k, lane._memory_ranker(conn, terms) if terms else None)
        )
        joined = await lane.db.run(lambda conn: lane._ranked(conn, expr, "1 = 1", [], top_k))
        assert len(split) == min(top_k, 6)
        assert [row[:-1] for row in split] == [row[:-1] for row in joined]
        assert [row[-1] for row in split] == pytest.approx([row[-1] for row in joined], rel=1e-12)

    async def test_a_row_gone_before_its_payload_is_read_is_left_out(self, lane: SqliteFtsKeywordLane) -> None:
        """A ranked row that a writer deleted before its payload was read is left out; order is kept."""
        rowids = await lane.db.run(lambda conn: dict(conn.execute("SELECT id, rowid FROM chunks").fetchall()))
        top = [(rowids["b"], -3.0), (10_000, -2.0), (rowids["a"], -1.0)]
        rows = await lane.db.run(lambda conn: mod._with_payload(conn, top))
        assert [(row[0], row[-1]) for row in rows] == [("b", -3.0), ("a", -1.0)]
        assert await lane.db.run(lambda conn: mod._with_payload(conn, [])) == []


def test_public_api() -> None:
    """The module exports exactly its lane and the expression builder."""
    assert sorted(mod.__all__) == [
        "BACKEND", "SqliteFtsKeywordLane", "expression_parts", "match_expression", "query_terms"
    ]  # fmt: skip


class TestTenants:
    async def test_each_tenant_searches_only_its_own_store(self, tmp_path: Path) -> None:
        """Three tenants write the same words; each one's lane answers only its own ids, from its own file
        (``default`` keeps ``<home>/keyword.sqlite``, others ``<home>/tenants/<tenant>/keyword.sqlite``)."""
        kspec = spec(LaneKind.KEYWORD, "sqlite_fts")

        def of(tenant: str) -> LaneResources:
            return resources(tmp_path, tenant=tenant)

        await write_as_each(lambda r: SqliteFtsWriter(kspec, r), of, plain)
        assert await search_as_each(lambda r: SqliteFtsKeywordLane(kspec, r), of) == own_ids()
        assert (tmp_path / "keyword.sqlite").is_file()
        assert (tmp_path / "tenants" / "acme" / "keyword.sqlite").is_file()

    async def test_explicit_path_is_scoped_per_tenant(self, tmp_path: Path) -> None:
        """An ``options.path`` store gets a ``tenants/<tenant>/`` folder next to it for every other tenant."""
        kspec = spec(LaneKind.KEYWORD, "sqlite_fts", path=str(tmp_path / "stores" / "kw.sqlite"))

        def of(tenant: str) -> LaneResources:
            return resources(tmp_path / "home", tenant=tenant)

        await write_as_each(lambda r: SqliteFtsWriter(kspec, r), of, plain)
        assert await search_as_each(lambda r: SqliteFtsKeywordLane(kspec, r), of) == own_ids()
        assert (tmp_path / "stores" / "tenants" / "beta" / "kw.sqlite").is_file()
