"""Tests of the HNSW accelerator of the flat vector store, on real hnswlib graphs over real SQLite stores: unfiltered
searches answered from the graph equal the exact search, filtered ones never use it, rows appended after the build
are found and deleted ones never come back, a saved graph is reused only for the rows it was built on, and a stale
graph is rebuilt in the background."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import lanes.vector.numpy_flat.ann as mod
from fabric.core.errors import ConfigError
from fabric.core.models import LaneKind, Trust
from lanes.base import LaneSpec
from lanes.vector.numpy_flat.ann import AnnConfig, AnnGraph, ann_config, ids_digest, load_graph
from lanes.vector.numpy_flat.index import FlatIndex, VectorFilter, build_for_store
from lanes.vector.numpy_flat.store import TRUST_CODES
from lanes.vector.numpy_flat.writer import FlatVectorWriter
from tests.support.embedded import BagEmbedder, chunk, resources, spec

pytest.importorskip("hnswlib", reason="the ann extra (hnswlib) is not installed")

CFG = AnnConfig(min_rows=100, ef_search=64)
DIM = 24


def unit_rows(n: int, seed: int) -> np.ndarray:
    m = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    out: np.ndarray = m / np.linalg.norm(m, axis=1, keepdims=True)
    return out


async def store_rows(home: Path, matrix: np.ndarray, start: int = 0, **options: int) -> FlatVectorWriter:
    """Upsert one chunk per row (ids ``r00000``... from ``start``), every tenth one trusted; the open writer."""
    lane = LaneSpec(name="vector", kind=LaneKind.VECTOR, backend="numpy_flat", options=options)
    writer = FlatVectorWriter(lane, resources(home, BagEmbedder()))
    await writer.open()
    chunks = [
        replace(
            chunk(f"r{start + i:05d}", f"row {i}", trust=Trust.TRUSTED if (start + i) % 10 == 0 else Trust.UNTRUSTED),
            vector=tuple(map(float, v)),
        )
        for i, v in enumerate(matrix)
    ]
    await writer.upsert(chunks)
    return writer


def exact(index: FlatIndex, q: np.ndarray, k: int, flt: VectorFilter | None = None) -> list[tuple[str, float]]:
    """The same search with the accelerator switched off."""
    plain = FlatIndex(index.path)
    try:
        return plain.search(q, k, flt)
    finally:
        plain.close()


def agree(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> bool:
    """Same ids in the same order, scores equal to float32 rounding (a product over fewer rows may round apart)."""
    return [r for r, _ in got] == [r for r, _ in want] and np.allclose([s for _, s in got], [s for _, s in want])


async def test_ingest_builds_graph_and_searches_match_exact(tmp_path: Path) -> None:
    """finish() saves a graph; a reader loads it, and its unfiltered top 10 are the exact top 10 with exact scores."""
    writer = await store_rows(tmp_path, unit_rows(1500, seed=1), ann_min_rows=100, ann_ef=64)
    assert await writer.finish() == {"rows": 1500, "built": True}
    assert await writer.finish() == {"rows": 1500, "built": False}  # the saved graph is current
    await writer.aclose()
    index = FlatIndex(writer.path, CFG)
    snap = index.snapshot()
    assert snap.graph is not None
    assert snap.graph.n == 1500
    queries = unit_rows(40, seed=2)
    same = [agree(index.search(q, 10), exact(index, q, 10)) for q in queries]
    assert sum(same) >= 38  # an approximate graph: nearly every top 10 is the exact one, scores included
    index.close()


async def test_filtered_search_is_exact_with_a_graph(tmp_path: Path) -> None:
    """A filtered search scores every passing row, not the graph's candidates."""
    writer = await store_rows(tmp_path, unit_rows(600, seed=3))
    await build_writer_graph(writer)
    index = FlatIndex(writer.path, CFG)
    assert index.snapshot().graph is not None
    flt = VectorFilter(trust=TRUST_CODES[Trust.TRUSTED.value])
    for q in unit_rows(10, seed=4):
        assert index.search(q, 20, flt) == exact(index, q, 20, flt)
    index.close()


async def build_writer_graph(writer: FlatVectorWriter) -> None:
    await writer.aclose()
    assert build_for_store(writer.path, CFG, threads=1)["built"]


async def test_tail_rows_found_and_deleted_rows_dropped(tmp_path: Path) -> None:
    """Rows appended after the build are scored (they are not in the graph); deleted rows never come back."""
    base = unit_rows(500, seed=5)
    writer = await store_rows(tmp_path, base)
    await build_writer_graph(writer)
    index = FlatIndex(writer.path, CFG)
    assert index.snapshot().graph is not None
    extra = unit_rows(5, seed=6)
    writer = await store_rows(tmp_path, extra, start=500)
    await writer.delete(["r00007"])
    await writer.aclose()
    snap = index.snapshot()
    assert snap.graph is not None
    assert snap.graph.n == 500
    assert snap.n == 505
    assert index.search(extra[2], 1)[0][0] == "r00502"
    assert all(rid != "r00007" for rid, _ in index.search(base[7], 10))
    assert agree(index.search(base[7], 10), exact(index, base[7], 10))
    index.close()


async def test_graph_search_error_falls_back_to_exact(tmp_path: Path) -> None:
    """hnswlib raises RuntimeError when it finds fewer neighbours than asked: that search is answered exactly."""

    class Short:  # hnswlib's error for a graph that cannot return k results
        def knn_query(self, *args: object, **kw: object) -> None:
            raise RuntimeError("Cannot return the results in a contiguous 2D array. Probably ef or M is too small")

    rows = unit_rows(300, seed=12)
    writer = await store_rows(tmp_path, rows)
    await build_writer_graph(writer)
    index = FlatIndex(writer.path, CFG)
    graph = index.snapshot().graph
    assert graph is not None
    index._graph = replace(graph, index=Short())
    assert agree(index.search(rows[3], 10), exact(index, rows[3], 10))
    index.close()


async def test_saved_graph_reused_only_for_its_rows(tmp_path: Path) -> None:
    """The digest ties a saved graph to its rows: another order of ids is refused."""
    writer = await store_rows(tmp_path, unit_rows(300, seed=7))
    await build_writer_graph(writer)
    fresh = FlatIndex(writer.path)
    snap = fresh.snapshot()
    assert load_graph(writer.path, snap.ids, DIM, 1, CFG) is not None
    assert load_graph(writer.path, snap.ids[::-1], DIM, 1, CFG) is None
    assert load_graph(writer.path, snap.ids, DIM, 1, replace(CFG, m=8)) is None  # other build parameters
    fresh.close()
    assert load_graph(tmp_path / "missing.sqlite", snap.ids, DIM, 1, CFG) is None


async def test_corrupt_graph_file_falls_back_to_exact(tmp_path: Path) -> None:
    """An unreadable graph is logged and ignored: searches stay exact."""
    writer = await store_rows(tmp_path, unit_rows(200, seed=8))
    await build_writer_graph(writer)
    writer.path.with_name(writer.path.name + ".hnsw").write_bytes(b"not a graph")
    assert load_graph(writer.path, FlatIndex(writer.path).snapshot().ids, DIM, 1, CFG) is None


async def test_stale_graph_rebuilt_in_background(tmp_path: Path) -> None:
    """More than a tenth of new rows makes the graph stale: a search keeps working exactly while a new graph is
    built in the background, published and saved."""
    writer = await store_rows(tmp_path, unit_rows(400, seed=9))
    await build_writer_graph(writer)
    index = FlatIndex(writer.path, CFG)
    assert index.snapshot().graph is not None
    more = unit_rows(100, seed=10)
    writer = await store_rows(tmp_path, more, start=400)
    await writer.aclose()
    assert index.search(more[0], 1)[0][0] == "r00400"
    graph = await asyncio.to_thread(wait_for_graph, index, 500)
    assert graph is not None
    assert graph.n == 500
    assert load_graph(writer.path, index.snapshot().ids, DIM, 1, CFG) is not None  # saved for the next reader
    index.close()


def wait_for_graph(index: FlatIndex, rows: int) -> AnnGraph | None:
    """The index's graph once it covers ``rows`` rows (None after a minute)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        graph = index.snapshot().graph
        if graph is not None and graph.n == rows:
            return graph
        time.sleep(0.05)
    return None


async def test_small_store_builds_nothing(tmp_path: Path) -> None:
    """Below min_rows there is no graph: nothing is built, saved or loaded."""
    writer = await store_rows(tmp_path, unit_rows(50, seed=11))
    await writer.aclose()
    assert build_for_store(writer.path, CFG) == {"rows": 50, "built": False}
    assert not writer.path.with_name(writer.path.name + ".hnsw").exists()
    index = FlatIndex(writer.path, CFG)
    assert index.snapshot().graph is None
    index.close()


def test_options() -> None:
    """The lane options set the accelerator; a wrong type names its key."""
    cfg = ann_config(spec(LaneKind.VECTOR, "numpy_flat", ann=False, ann_min_rows=10, ann_ef=50))
    assert (cfg.enabled, cfg.min_rows, cfg.ef_search) == (False, 10, 50)
    assert ann_config(spec(LaneKind.VECTOR, "numpy_flat")) == AnnConfig()
    with pytest.raises(ConfigError) as err:
        ann_config(spec(LaneKind.VECTOR, "numpy_flat", ann_ef="wide"))
    assert err.value.key == "lanes.vector.options.ann_ef"


def test_stale_after_a_tenth_of_the_graph_changed() -> None:
    """Appended plus deleted rows up to a tenth of the graph keep it; one more makes it stale."""
    cfg = AnnConfig()
    assert cfg.fresh(1000, 1100, 0)
    assert not cfg.fresh(1000, 1101, 0)
    assert cfg.fresh(1000, 1050, 50)
    assert not cfg.fresh(1000, 1000, 101)


def test_digest_depends_on_order() -> None:
    assert ids_digest(["a", "b"]) != ids_digest(["b", "a"])
    assert ids_digest(["ab"]) != ids_digest(["a", "b"])


def test_public_api() -> None:
    assert mod.__all__ == [
        "AnnConfig",
        "AnnGraph",
        "ann_config",
        "available",
        "build_graph",
        "ids_digest",
        "load_graph",
        "save_graph",
        "saved_rows",
    ]


def test_without_hnswlib_every_search_is_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """hnswlib is optional: without it the accelerator is never enabled, whatever the options say."""
    real = mod.importlib.util.find_spec
    mod.available.cache_clear()
    try:
        with monkeypatch.context() as m:
            m.setattr(mod.importlib.util, "find_spec", lambda name: None if name == "hnswlib" else real(name))
            assert ann_config(spec(LaneKind.VECTOR, "numpy_flat", ann=True)).enabled is False
    finally:
        mod.available.cache_clear()
    assert ann_config(spec(LaneKind.VECTOR, "numpy_flat", ann=True)).enabled is True
