"""Tests of the flat index: exact top-k against a brute-force reference, filters before top-k, ties by id,
incremental refresh after writes (also from another process), and snapshots that writes never disturb."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import lanes.vector.numpy_flat.index as mod
from fabric.core.models import Trust
from lanes.vector.numpy_flat.index import FlatIndex, VectorFilter
from lanes.vector.numpy_flat.store import TRUST_CODES
from tests.lanes.vector.numpy_flat.test_writer import write
from tests.support.embedded import BagEmbedder, chunk


def unit_rows(n: int, dim: int, seed: int) -> np.ndarray:
    """``n`` random unit vectors."""
    m = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


async def write_vectors(home: Path, matrix: np.ndarray, **kw: object) -> Path:
    """Store one chunk per row of ``matrix`` (ids ``r0000``...) with the given chunk fields."""
    chunks = [replace(chunk(f"r{i:04d}", f"row {i}", **kw), vector=tuple(map(float, v))) for i, v in enumerate(matrix)]
    from lanes.vector.numpy_flat.writer import FlatVectorWriter
    from tests.lanes.vector.numpy_flat.test_writer import VSPEC
    from tests.support.embedded import resources

    store = FlatVectorWriter(VSPEC, resources(home, BagEmbedder()))
    await store.open()
    await store.upsert(chunks)
    await store.aclose()
    return store.path


class TestExactSearch:
    @pytest.fixture(params=["gemv", "einsum"], autouse=True)
    def product(self, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
        """Both scoring paths: BLAS's gemv (the CLI runs BLAS on one thread) and einsum (a multi-threaded BLAS)."""
        monkeypatch.setattr(mod, "blas_single_threaded", lambda: request.param == "gemv")

    async def test_top_k_equals_brute_force(self, tmp_path: Path) -> None:
        """The top 10 of 500 random rows are the reference argsort's, scores included."""
        m = unit_rows(500, 32, seed=1)
        index = FlatIndex(await write_vectors(tmp_path, m))
        q = unit_rows(1, 32, seed=2)[0]
        got = index.search(q.tolist(), 10)
        ref = np.argsort(-(m @ q), kind="stable")[:10]
        assert [rid for rid, _ in got] == [f"r{i:04d}" for i in ref]
        assert [s for _, s in got] == pytest.approx([float(m[i] @ q) for i in ref], abs=1e-6)

    async def test_ties_are_ordered_by_id(self, tmp_path: Path) -> None:
        """Equal scores rank by id, also across the k-th position (every tied row competes)."""
        m = np.tile(unit_rows(1, 8, seed=3), (6, 1))
        index = FlatIndex(await write_vectors(tmp_path, m[::-1]))
        assert [rid for rid, _ in index.search(m[0].tolist(), 3)] == ["r0000", "r0001", "r0002"]

    async def test_empty_or_missing_store_returns_nothing(self, tmp_path: Path) -> None:
        """A store file that does not exist yet answers with no rows (and is not created by the reader)."""
        index = FlatIndex(tmp_path / "none.sqlite")
        assert index.search([1.0, 0.0], 5) == []
        assert not (tmp_path / "none.sqlite").exists()

    async def test_wrong_dimension_is_an_error(self, tmp_path: Path) -> None:
        """A query of another dimension raises ValueError (the lane maps it)."""
        index = FlatIndex(await write_vectors(tmp_path, unit_rows(3, 8, seed=4)))
        with pytest.raises(ValueError, match="dimension"):
            index.search([1.0, 0.0], 2)


class TestFilters:
    async def test_year_range_fills_top_k_from_deep_ranks(self, tmp_path: Path) -> None:
        """Thirty near rows without years do not crowd out the five in-range rows."""
        emb = BagEmbedder()
        near = [chunk(f"n{i:02d}", "alpha beta gamma delta") for i in range(30)]
        far = [chunk(f"y{i}", f"alpha report of {2019 + i % 3}") for i in range(5)]
        index = FlatIndex(await write(tmp_path, near + far, emb))
        q = emb.embed(["alpha beta gamma delta"])[0]
        got = index.search(q, 5, VectorFilter(year_from=2019, year_to=2020))
        assert sorted(rid for rid, _ in got) == ["y0", "y1", "y3", "y4"]

    async def test_trust_and_sites(self, tmp_path: Path) -> None:
        """Trust keeps its rows only; sites keep a domain and its sub-domains, not look-alikes."""
        emb = BagEmbedder()
        chunks = [
            chunk("a", "alpha", url="https://example.org/a", trust=Trust.TRUSTED),
            chunk("b", "alpha", url="https://docs.example.org/b"),
            chunk("c", "alpha", url="https://badexample.org/c"),
        ]
        index = FlatIndex(await write(tmp_path, chunks, emb))
        q = emb.embed(["alpha"])[0]
        assert [r for r, _ in index.search(q, 5, VectorFilter(trust=TRUST_CODES["trusted"]))] == ["a"]
        assert [r for r, _ in index.search(q, 5, VectorFilter(sites=("Example.org",)))] == ["a", "b"]
        assert index.search(q, 5, VectorFilter(sites=("nowhere.net",))) == []


class TestRefresh:
    async def test_follows_upserts_and_deletes(self, tmp_path: Path) -> None:
        """After writes the reader sees new rows, replaced vectors and no deleted ids."""
        emb = BagEmbedder()
        index = FlatIndex(await write(tmp_path, [chunk("a", "alpha"), chunk("b", "beta")], emb))
        q = emb.embed(["gamma"])[0]
        before = index.snapshot()
        assert before.n == 2
        await write(tmp_path, [chunk("b", "gamma"), chunk("c", "gamma delta")], emb, gone=("a",))
        got = index.search(q, 5)
        assert [r for r, _ in got] == ["b", "c"]
        assert got[0][1] == pytest.approx(1.0, abs=1e-6)
        assert before.alive[:2].tolist() == [True, True]  # the old snapshot was not disturbed

    async def test_rebuilds_when_many_rows_are_dead(self, tmp_path: Path) -> None:
        """Replacing every row repeatedly keeps the live set right (the arrays are rebuilt, not grown forever)."""
        emb = BagEmbedder()
        chunks = [chunk(f"c{i:04d}", f"word{i}") for i in range(1500)]
        index = FlatIndex(await write(tmp_path, chunks, emb))
        for _ in range(3):
            await write(tmp_path, chunks, emb)
            snap = index.snapshot()
            assert int(snap.alive[: snap.n].sum()) == 1500
        assert snap.n < 1500 * 3

    async def test_sees_writes_of_another_process(self, tmp_path: Path) -> None:
        """A writer in a child process commits; the open reader picks the rows up on its next search."""
        emb = BagEmbedder()
        index = FlatIndex(await write(tmp_path, [chunk("a", "alpha")], emb))
        assert index.snapshot().n == 1
        code = (
            "import asyncio, sys; from pathlib import Path; sys.path.insert(0, '.');"
            "from tests.support.embedded import BagEmbedder, chunk;"
            "from tests.lanes.vector.numpy_flat.test_writer import write;"
            f"asyncio.run(write(Path({str(tmp_path)!r}), [chunk('b', 'alpha beta')], BagEmbedder()))"
        )
        child = await asyncio.create_subprocess_exec(sys.executable, "-c", code, cwd=Path(__file__).parents[4])
        assert await child.wait() == 0
        assert [r for r, _ in index.search(emb.embed(["alpha"])[0], 5)] == ["a", "b"]


def test_public_api() -> None:
    """The module exports the index, its snapshot and the filter."""
    assert mod.__all__ == ["FlatIndex", "Snapshot", "VectorFilter", "build_for_store"]
