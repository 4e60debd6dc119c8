"""The contract every vector backend passes, run on each embedded one: ``numpy_flat``, ``qdrant`` (local mode) and
``lancedb``, each writer and lane for real in ``tmp_path``.

Same chunks, same queries, same answers: the nearest chunk first with its stored payload and a cosine score,
filters (date range, ``site:`` with sub-domains, the ``trust`` option) applied before the top-k, idempotent upserts,
deletes, reopening, a lane opened before the first write, the ids a store lists, and tenants kept apart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fabric.core.chunks import Chunk, StoreWriter
from fabric.core.errors import LaneUnavailable
from fabric.core.models import BoundConstraints, LaneKind, LaneRequest, Trust
from lanes.base import Lane, LaneResources, LaneSpec
from lanes.registry import descriptor
from tests.support.embedded import BagEmbedder, chunk, resources, spec
from tests.support.tenants import embedded, own_ids, search_as_each, write_as_each


@dataclass(frozen=True)
class Backend:
    """One vector backend under test: its writer and lane built from a spec with options."""

    name: str

    def spec(self, **options: Any) -> LaneSpec:
        return spec(LaneKind.VECTOR, self.name, **options)

    def writer(self, res: LaneResources, **options: Any) -> StoreWriter:
        factory = descriptor(self.name).writer
        assert factory is not None
        return factory(self.spec(**options), res)

    def lane(self, res: LaneResources, **options: Any) -> Lane:
        return descriptor(self.name).lane(self.spec(**options), res)


@pytest.fixture(params=["numpy_flat", "qdrant", "lancedb"])
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each embedded vector backend in turn."""
    return Backend(request.param)


def vectors(chunks: list[Chunk], emb: BagEmbedder) -> list[Chunk]:
    """The chunks with their bag-of-words vectors."""
    vecs = emb.embed([c.embed_text for c in chunks])
    return [replace(c, vector=tuple(v)) for c, v in zip(chunks, vecs, strict=True)]


async def write(
    backend: Backend, home: Path, chunks: list[Chunk], emb: BagEmbedder, gone: tuple[str, ...] = ()
) -> None:
    """Upsert ``chunks`` and delete ``gone`` with a fresh writer, then close it."""
    store = backend.writer(resources(home, emb))
    await store.open()
    try:
        await store.upsert(vectors(chunks, emb))
        await store.delete(list(gone))
    finally:
        await store.aclose()


async def search(backend: Backend, home: Path, emb: BagEmbedder, query: str, **kw: Any) -> list[Any]:
    """The hits of one search by a fresh lane (``trust`` is the lane option, the rest the request's)."""
    options = {"trust": kw.pop("trust")} if "trust" in kw else {}
    lane = backend.lane(resources(home, emb), **options)
    await lane.open()
    try:
        return await lane.search(LaneRequest(query=query, **kw))
    finally:
        await lane.aclose()


async def test_nearest_first_with_payload_and_cosine_score(backend: Backend, tmp_path: Path) -> None:
    """The chunk sharing the query's words ranks first; the hit carries the payload; the score is the cosine."""
    emb = BagEmbedder()
    chunks = [
        chunk("a", "apple banana", title="Fruit", url="https://www.site.org/p/?utm_source=x"),
        chunk("b", "car engine wheel", published_at=datetime(2021, 3, 1, tzinfo=UTC)),
    ]
    await write(backend, tmp_path, chunks, emb)
    hits = await search(backend, tmp_path, emb, "banana apple", top_k=2)
    assert [(h.id, h.rank) for h in hits] == [("a", 1), ("b", 2)]
    q, a = emb.embed(["banana apple", chunks[0].embed_text])
    assert hits[0].score == pytest.approx(sum(x * y for x, y in zip(q, a, strict=True)), abs=1e-5)
    assert (hits[0].title, hits[0].domain, hits[0].url_key) == ("Fruit", "site.org", "site.org/p")
    assert hits[0].simhash == chunks[0].simhash
    assert (hits[1].published_at, hits[1].metadata["years"]) == (datetime(2021, 3, 1, tzinfo=UTC), [2021])


async def test_date_range_and_trust_filter_before_top_k(backend: Backend, tmp_path: Path) -> None:
    """A year range and trust = trusted fill top_k from the rows passing both, however deep they rank."""
    emb = BagEmbedder()
    near = [chunk(f"n{i:02d}", "alpha beta gamma", trust=Trust.TRUSTED) for i in range(20)]
    far = [chunk("old", "alpha in 2019"), chunk("ok", "alpha in 2019", trust=Trust.TRUSTED)]
    await write(backend, tmp_path, near + far, emb)
    c = BoundConstraints(date_from=datetime(2019, 1, 1, tzinfo=UTC), date_to=datetime(2019, 12, 31, tzinfo=UTC))
    hits = await search(backend, tmp_path, emb, "alpha beta gamma", top_k=3, constraints=c, trust="trusted")
    assert [h.id for h in hits] == ["ok"]
    hits = await search(backend, tmp_path, emb, "alpha beta gamma", top_k=3, constraints=c)
    assert sorted(h.id for h in hits) == ["ok", "old"]


async def test_one_sided_date_range(backend: Backend, tmp_path: Path) -> None:
    """A range open on one side keeps the chunks mentioning a year on its side."""
    emb = BagEmbedder()
    await write(
        backend, tmp_path, [chunk("early", "alpha 1999"), chunk("late", "alpha 2021"), chunk("none", "alpha")], emb
    )
    since = BoundConstraints(date_from=datetime(2000, 1, 1, tzinfo=UTC))
    until = BoundConstraints(date_to=datetime(2000, 12, 31, tzinfo=UTC))
    assert [h.id for h in await search(backend, tmp_path, emb, "alpha", top_k=5, constraints=since)] == ["late"]
    assert [h.id for h in await search(backend, tmp_path, emb, "alpha", top_k=5, constraints=until)] == ["early"]


async def test_site_filter_keeps_subdomains_and_fills_top_k(backend: Backend, tmp_path: Path) -> None:
    """``site:`` keeps the domain and its sub-domains, never a look-alike, and fills top_k from deep ranks."""
    emb = BagEmbedder()
    near = [chunk(f"n{i:02d}", "alpha beta gamma", url=f"https://other{i}.org/") for i in range(40)]
    far = [
        chunk("root", "alpha", url="https://docs.org/a"),
        chunk("sub", "alpha zeta", url="https://api.docs.org/b"),
        chunk("alike", "alpha beta", url="https://notdocs.org/c"),
    ]
    await write(backend, tmp_path, near + far, emb)
    c = BoundConstraints(sites=("docs.org",))
    hits = await search(backend, tmp_path, emb, "alpha beta gamma", top_k=2, constraints=c)
    assert sorted(h.id for h in hits) == ["root", "sub"]


async def test_upsert_is_idempotent(backend: Backend, tmp_path: Path) -> None:
    """Writing an id again replaces it: one hit, the new text."""
    emb = BagEmbedder()
    await write(backend, tmp_path, [chunk("a", "alpha"), chunk("b", "beta")], emb)
    await write(backend, tmp_path, [chunk("a", "alpha changed"), chunk("a", "alpha changed")], emb)
    hits = await search(backend, tmp_path, emb, "alpha changed", top_k=10)
    assert sorted(h.id for h in hits) == ["a", "b"]
    assert hits[0].text == "alpha changed"


async def test_delete_removes_and_ignores_unknown_ids(backend: Backend, tmp_path: Path) -> None:
    """A deleted id is gone from the answers and the listed ids; an unknown id is ignored."""
    emb = BagEmbedder()
    await write(backend, tmp_path, [chunk("a", "alpha"), chunk("b", "alpha beta")], emb, gone=("a", "zz"))
    assert [h.id for h in await search(backend, tmp_path, emb, "alpha", top_k=10)] == ["b"]
    store = backend.writer(resources(tmp_path, emb))
    await store.open()
    try:
        assert await store.ids() == {"b"}  # type: ignore[attr-defined]
    finally:
        await store.aclose()


async def test_reopened_store_keeps_rows_and_a_waiting_lane_sees_writes(backend: Backend, tmp_path: Path) -> None:
    """A lane opened before the first write answers nothing, then sees what writers (each reopening the store)
    add, without being reopened."""
    emb = BagEmbedder()
    lane = backend.lane(resources(tmp_path, emb))
    await lane.open()
    try:
        assert await lane.search(LaneRequest(query="alpha")) == []
        await write(backend, tmp_path, [chunk("a", "alpha")], emb)
        await write(backend, tmp_path, [chunk("b", "alpha beta")], emb)
        assert [h.id for h in await lane.search(LaneRequest(query="alpha", top_k=5))] == ["a", "b"]
    finally:
        await lane.aclose()


async def test_empty_query_no_embedder(backend: Backend, tmp_path: Path) -> None:
    """A blank query or top_k 0 answers nothing without encoding; no embedder makes the lane unavailable."""
    emb = BagEmbedder()
    lane = backend.lane(resources(tmp_path, emb))
    assert await lane.search(LaneRequest(query="  ")) == []
    assert await lane.search(LaneRequest(query="x", top_k=0)) == []
    assert emb.calls == 0
    await lane.aclose()
    with pytest.raises(LaneUnavailable):
        await backend.lane(resources(tmp_path, None)).search(LaneRequest(query="x"))


async def test_each_tenant_searches_only_its_own_vectors(backend: Backend, tmp_path: Path) -> None:
    """Each tenant's nearest neighbours come from its own store only."""
    emb = BagEmbedder()

    def of(tenant: str) -> LaneResources:
        return resources(tmp_path, emb, tenant=tenant)

    make_writer: Callable[[LaneResources], StoreWriter] = backend.writer
    await write_as_each(make_writer, of, embedded(emb))
    assert await search_as_each(backend.lane, of) == own_ids()
