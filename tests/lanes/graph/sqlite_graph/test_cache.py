"""Tests of the graph lane's per-entity cache (lanes/graph/sqlite_graph/cache.py) on real SQLite stores.

The lane's scores are checked against the lane's definition computed here from the tables themselves (every
mention and relation row read into Python), on a random graph, with the cache cold and warm; then what a write,
a delete or an older read snapshot does to the cache.
"""

from __future__ import annotations

import math
import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest

import lanes.graph.sqlite_graph.cache as mod
from fabric.core.chunks import Chunk
from fabric.core.models import LaneKind, LaneRequest
from lanes.graph._extract.entities import normalize_entity, query_ngrams
from lanes.graph.sqlite_graph.cache import EntityCache, Neighbours, store_generation, top_neighbours
from lanes.graph.sqlite_graph.lane import SqliteGraphLane
from lanes.graph.sqlite_graph.writer import SqliteGraphWriter
from tests.support.embedded import chunk, resources, spec

NAMES = [f"{a} {b}" for a in ("Ada", "Bela", "Cyra", "Dov", "Eko") for b in ("Lind", "Moss", "Nye", "Orr", "Pratt")]


def _corpus(rng: random.Random, n: int) -> list[Chunk]:
    """Chunks of one or two sentences naming some of :data:`NAMES` (common names more often), joined by words that
    make co-occurrences only or verb edges too (active and passive)."""
    weights = [1 / (1 + i) for i in range(len(NAMES))]
    out = []
    for i in range(n):
        sentences = []
        for _ in range(rng.randint(1, 2)):
            named = sorted(set(rng.choices(NAMES, weights, k=rng.randint(1, 4))))
            words = [rng.choice((" met ", " activates ", " is inhibited by ")) for _ in named[1:]]
            sentences.append("".join(w + n for w, n in zip(["", *words], named, strict=True)) + ".")
        out.append(chunk(f"c{i:03d}", " ".join(sentences)))
    return out


async def _store(home: Path, chunks: list[Chunk]) -> None:
    writer = SqliteGraphWriter(spec(LaneKind.GRAPH, "sqlite_graph"), resources(home))
    await writer.open()
    await writer.upsert(chunks)
    await writer.aclose()


def _by_definition(conn: sqlite3.Connection, query: str, fanout: int, decay: float, max_df: float) -> dict[str, float]:
    """The lane's scores (module docstring of lanes.graph.sqlite_graph.lane) from the whole tables, without the
    lane's SQL."""
    ids = dict(conn.execute("SELECT norm, id FROM entities"))
    chunks: dict[int, set[str]] = {}
    for eid, cid in conn.execute("SELECT entity_id, chunk_id FROM mentions"):
        chunks.setdefault(eid, set()).add(cid)
    votes: dict[int, set[tuple[int, str]]] = {}  # entity → {(neighbour, chunk)}
    for s, p, o, cid in conn.execute("SELECT subject_id, predicate, object_id, chunk_id FROM relations"):
        votes.setdefault(s, set()).add((o, cid))
        if p == "co_occurs":
            votes.setdefault(o, set()).add((s, cid))
    n_chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    grams = [normalize_entity(g) for g in query_ngrams(query)]
    matched = [ids[g] for g in dict.fromkeys(grams) if g in ids]
    reach = {e: 0 for e in matched if chunks.get(e)}
    totals: dict[int, int] = {}
    for e in matched:
        for other, _ in votes.get(e, ()):
            totals[other] = totals.get(other, 0) + 1
    ranked = sorted(totals, key=lambda o: (-totals[o], o))[: fanout + len(reach)]
    for other in [o for o in ranked if o not in reach][:fanout]:
        if chunks.get(other):
            reach[other] = 1
    scores: dict[str, float] = {}
    for e in sorted(reach):
        df = len(chunks[e])
        if reach[e] and df > max(max_df * n_chunks, 50):
            continue
        weight = math.log(1 + n_chunks / df) * decay ** reach[e]
        for c in chunks[e]:
            scores[c] = scores.get(c, 0.0) + weight
    return scores


class TestScores:
    async def test_cold_and_warm_scores_match_the_definition_on_a_random_graph(self, tmp_path: Path) -> None:
        """300 chunks over 25 names; 40 queries of one to three names, each searched twice (cache cold, then warm):
        every chunk's score equals the definition's, to the last bit, and the hits follow them."""
        rng = random.Random(7)
        await _store(tmp_path, _corpus(rng, 300))
        queries = [" and ".join(rng.sample(NAMES, rng.randint(1, 3))) for _ in range(40)]
        lane_spec = spec(LaneKind.GRAPH, "sqlite_graph", fanout=4, neighbour_max_df=0.5)
        async with SqliteGraphLane(lane_spec, resources(tmp_path)) as lane:
            conn = lane.db.conn()
            for _ in range(2):
                for q in queries:
                    expected = _by_definition(conn, q, fanout=4, decay=0.5, max_df=0.5)
                    grams = list(dict.fromkeys(normalize_entity(g) for g in query_ngrams(q)))
                    _, scores, *_ = lane._search(conn, LaneRequest(query=q, top_k=10), [], grams)
                    assert scores == expected, q
                    hits = await lane.search(LaneRequest(query=q, top_k=10))
                    best = sorted(expected, key=lambda c: (-expected[c], c))[:10]
                    assert [h.id for h in hits] == best
            assert lane.cache._chunks  # the second round read from the cache


class TestFreshness:
    async def test_writes_and_deletes_are_seen_by_the_next_search(self, tmp_path: Path) -> None:
        """A chunk written (by another writer) after a search is found by the next one, through the same lane and
        its warm cache; a deleted chunk is gone from the next one; each write moves the generation on."""
        await _store(tmp_path, [chunk("c1", "Marie Curie met Pierre Curie."), chunk("c2", "Pierre Curie taught.")])
        async with SqliteGraphLane(spec(LaneKind.GRAPH, "sqlite_graph"), resources(tmp_path)) as lane:
            request = LaneRequest(query="Pierre Curie", top_k=10)
            gen = lane.db.call(store_generation)
            assert {h.id for h in await lane.search(request)} == {"c1", "c2"}
            await _store(tmp_path, [chunk("c3", "Pierre Curie lectured.")])
            assert lane.db.call(store_generation) == gen + 1
            assert {h.id for h in await lane.search(request)} == {"c1", "c2", "c3"}
            writer = SqliteGraphWriter(spec(LaneKind.GRAPH, "sqlite_graph"), resources(tmp_path))
            await writer.delete(["c2"])
            await writer.aclose()
            assert lane.db.call(store_generation) == gen + 2
            assert {h.id for h in await lane.search(request)} == {"c1", "c3"}

    def test_an_older_snapshot_neither_uses_nor_fills_the_cache(self, tmp_path: Path) -> None:
        """Generation 5 fills the cache; a reader still at 4 gets the rows it reads itself and leaves the cache as
        it is; generation 6 empties it."""
        conn = sqlite3.connect(tmp_path / "g.sqlite")
        conn.executescript(
            "CREATE TABLE mentions (entity_id INTEGER, chunk_id TEXT);"
            "INSERT INTO mentions VALUES (1, 'a'), (1, 'b'), (2, 'c');"
        )
        cache = EntityCache()
        assert cache.chunks(conn, 5, [1, 2, 3]) == {1: ("a", "b"), 2: ("c",), 3: ()}
        conn.execute("INSERT INTO mentions VALUES (1, 'z')")
        assert cache.chunks(conn, 5, [1]) == {1: ("a", "b")}  # cached: generation 5 said nothing changed
        assert cache.chunks(conn, 4, [1]) == {1: ("a", "b", "z")}
        assert cache._chunks[1] == ("a", "b")
        assert cache._gen == 5
        assert cache.chunks(conn, 6, [2]) == {2: ("c",)}
        assert cache._gen == 6
        assert set(cache._chunks) == {2}

    def test_a_store_without_generation_rows_is_generation_zero(self, tmp_path: Path) -> None:
        """A store no write of this code has touched (no ``graph_meta`` row) reads generation 0."""
        conn = sqlite3.connect(tmp_path / "g.sqlite")
        conn.execute("CREATE TABLE graph_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)")
        assert store_generation(conn) == 0


class TestBudget:
    def test_over_budget_starts_again_empty(self, tmp_path: Path) -> None:
        """Past ``max_refs`` chunk references the cache holds only what was read last."""
        conn = sqlite3.connect(tmp_path / "g.sqlite")
        conn.executescript(
            "CREATE TABLE mentions (entity_id INTEGER, chunk_id TEXT);"
            + "".join(f"INSERT INTO mentions VALUES ({e}, 'c{e}_{i}');" for e in range(1, 4) for i in range(4))
        )
        cache = EntityCache(max_refs=12)
        cache.chunks(conn, 1, [1, 2])  # 8 references and 2 entries
        assert set(cache._chunks) == {1, 2}
        cache.chunks(conn, 1, [3])
        assert set(cache._chunks) == {3}
        assert cache.chunks(conn, 1, [1]) == {1: tuple(f"c1_{i}" for i in range(4))}


class TestTopNeighbours:
    def test_votes_add_up_over_entities_ties_by_id(self) -> None:
        """Neighbour 7 gets 2 + 1 votes, 3 and 9 get 2 each (3 first), 5 gets 1."""

        def n(pairs: dict[int, int]) -> Neighbours:
            return Neighbours(np.array(list(pairs), dtype=np.int64), np.array(list(pairs.values()), dtype=np.int64))

        lists = [n({3: 2, 7: 2}), n({5: 1, 7: 1, 9: 2})]
        assert top_neighbours(lists, 10) == [7, 3, 9, 5]
        assert top_neighbours(lists, 2) == [7, 3]
        assert top_neighbours([n({9: 1, 4: 1})], 5) == [4, 9]
        assert top_neighbours([], 5) == top_neighbours(lists, 0) == []

    @pytest.mark.parametrize("seed", range(5))
    def test_equal_to_summing_by_hand(self, seed: int) -> None:
        """Random lists: the same order as summing votes in a dict and sorting by (-votes, id)."""
        rng = random.Random(seed)
        lists: list[Neighbours] = []
        totals: dict[int, int] = {}
        for _ in range(rng.randint(1, 6)):
            ids = sorted(rng.sample(range(60), rng.randint(0, 30)))
            weights = [rng.randint(1, 4) for _ in ids]
            lists.append(Neighbours(np.array(ids, dtype=np.int64), np.array(weights, dtype=np.int64)))
            for i, w in zip(ids, weights, strict=True):
                totals[i] = totals.get(i, 0) + w
        assert top_neighbours(lists, 25) == sorted(totals, key=lambda i: (-totals[i], i))[:25]


def test_public_api() -> None:
    """The module exports the cache, its neighbour lists and the two helpers."""
    assert set(mod.__all__) == {"EntityCache", "Neighbours", "store_generation", "top_neighbours"}
