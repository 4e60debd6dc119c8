"""Vector store candidates side by side on the same real MiniLM vectors: write time, search p50/p95, filtered
search, recall@100 against exact search (``python -m bench.vector_stores --json``; docs/vector-store.md).

Vectors are the SciFact scale passages' (:mod:`bench.scale_corpus`) read from the embedding cache
(``FABRIC_CACHE_DIR``), never computed here: with fewer cached than ``--size`` asks, the real ones are tiled
with a small Gaussian perturbation (renormalised) and the output says how many were real. Queries are SciFact
queries, encoded once (cached). Every row gets a year (``1990 + i % 30``); the filtered search keeps six years
(one row in five) and must still return its top 100 *among those rows*.

Candidates (each skipped when its package is missing): ``numpy_flat`` (this project's store, exact),
``numpy_flat_ann`` (the same store with its HNSW accelerator, :mod:`lanes.vector.numpy_flat.ann`: graph built as
``fabric
ingest`` builds it, ``index_s``; unfiltered searches through it, filtered ones exact), ``lancedb``
(this project's LanceDB backend, :mod:`lanes.vector.lancedb`, the extra's pinned 0.40.0: exact, and as
``lancedb_ivf_hnsw_sq`` with the IVF_HNSW_SQ index its ingest builds when ``--lance-index``), ``hnswlib``
(filter callback), ``usearch`` (no filter in its Python API: it over-fetches and post-filters), ``qdrant_local``
(``--qdrant``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["add_arguments", "run"]

K = 100
YEARS = (2000, 2005)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of the bench."""
    p.add_argument("--dataset", default="/work/shared/datasets/scifact", help="SciFact BEIR folder")
    p.add_argument("--sizes", default="5000,50000", help="store sizes, comma separated")
    p.add_argument("--queries", type=int, default=200, help="SciFact queries timed per size")
    p.add_argument("--candidates", default="numpy_flat,numpy_flat_ann,lancedb,hnswlib,usearch", help="comma separated")
    p.add_argument("--qdrant", action="store_true", help="also Qdrant local mode (slow to write at 50K)")
    p.add_argument("--lance-index", action="store_true", help="also the lancedb backend with its IVF_HNSW_SQ index")
    p.add_argument("--ef", default="64,128,256", help="HNSW search breadth(s) tried for recall")
    p.add_argument("--with-encoding", action="store_true", help="numpy_flat: also time cold MiniLM encoding + search")


def _pct(xs: Sequence[float]) -> tuple[float, float]:
    a = np.asarray(xs) * 1000.0
    return round(float(np.percentile(a, 50)), 3), round(float(np.percentile(a, 95)), 3)


def load_vectors(dataset: Path, size: int, seed: int = 7) -> tuple[np.ndarray, int]:
    """``size`` unit vectors: the cached real passage vectors, tiled and perturbed if too few; and the real count."""
    from bench.scale_corpus import passages_of
    from fabric.embed.embeddings import cache_key

    emb = _embedder()  # the engine's embedder: its cache, under the name its document vectors are cached as
    cache, name = emb.cache, emb.cache_name
    keys = []
    with (dataset / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            for p in passages_of(str(row["_id"]), str(row.get("title") or ""), str(row.get("text") or "")):
                keys.append(cache_key(name, f"{p.title} {p.text}".strip()))
    found = cache.get_many(keys)
    real = np.asarray([found[k] for k in keys if k in found][:size], dtype=np.float32)
    if len(real) == 0:
        raise SystemExit("no cached passage vectors: run `fabric bench scale` (or ingest the scale corpus) first")
    rng = np.random.default_rng(seed)
    reps = -(-size // len(real))
    tiled = np.concatenate([real] + [real + rng.normal(0, 0.02, real.shape).astype(np.float32)] * (reps - 1))
    out = tiled[:size]
    return out / np.linalg.norm(out, axis=1, keepdims=True), len(real)


def query_texts(dataset: Path, n: int) -> list[str]:
    """The first ``n`` SciFact queries."""
    return [json.loads(x)["text"] for x in (dataset / "queries.jsonl").read_text().splitlines() if x.strip()][:n]


def _embedder() -> Any:
    """The default embedder of the engine behind its cache (``FABRIC_CACHE_DIR``); exits when MiniLM is missing."""
    from fabric.embed.embeddings import build_embedder
    from fabric.settings import EmbeddingsConfig

    emb = build_embedder(EmbeddingsConfig(), Path(os.environ.get("FABRIC_CACHE_DIR", ".cache/fabric")))
    if emb is None:
        raise SystemExit("MiniLM is not available")
    return emb


def query_vectors(dataset: Path, n: int) -> np.ndarray:
    """The first ``n`` SciFact queries, encoded as the engine encodes queries (its query path, through the cache)."""
    return np.asarray(_embedder().embed_queries(query_texts(dataset, n)), dtype=np.float32)


def _exact(m: np.ndarray, q: np.ndarray, allowed: np.ndarray | None = None) -> list[set[int]]:
    scores = q @ m.T
    if allowed is not None:
        scores[:, ~allowed] = -np.inf
    return [set(np.argsort(-row, kind="stable")[:K].tolist()) for row in scores]


def _recall(got: list[list[int]], truth: list[set[int]]) -> float:
    return round(float(np.mean([len(set(g) & t) / len(t) for g, t in zip(got, truth, strict=True)])), 4)


def _time(search: Callable[[np.ndarray], list[int]], qs: np.ndarray) -> tuple[list[list[int]], list[float]]:
    out, ts = [], []
    for q in qs:
        t0 = time.perf_counter()
        out.append(search(q))
        ts.append(time.perf_counter() - t0)
    return out, ts


def _encode_and_search(index: Any, texts: Sequence[str]) -> dict[str, float]:
    """Per query: MiniLM encoding (no cache) then the flat search, timed together and apart."""
    from fabric.embed.embeddings import MiniLMEmbedder

    model = MiniLMEmbedder()
    model.warm()
    enc, total = [], []
    for text in texts:
        t0 = time.perf_counter()
        vec = model.embed([text])[0]
        t1 = time.perf_counter()
        index.search(vec, K)
        enc.append(t1 - t0)
        total.append(time.perf_counter() - t0)
    (ep50, ep95), (tp50, tp95) = _pct(enc), _pct(total)
    return {"encode_p50_ms": ep50, "encode_p95_ms": ep95, "c1_p50_ms": tp50, "c1_p95_ms": tp95}


class _Named:
    """The embedder a store writer is given here: writers read only its name (for their file or table name)."""

    name, dim = "bench", 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise NotImplementedError


def _chunks(m: np.ndarray, years: np.ndarray) -> list[Any]:
    """One chunk per vector: id ``str(i)``, its year, a payload of a typical length."""
    from fabric.core.chunks import Chunk

    base = Chunk(id="", doc_id="", chunk_id="", title="t", text="passage text of a typical length " * 6)
    return [replace(base, id=str(i), years=(int(years[i]),), vector=tuple(v.tolist())) for i, v in enumerate(m)]


def _numpy_flat(
    m: np.ndarray, years: np.ndarray, qs: np.ndarray, tmp: Path, texts: Sequence[str] = (), *, ann: bool = False
) -> dict[str, Any]:
    from fabric.core.models import LaneKind
    from lanes.base import LaneResources, LaneSpec
    from lanes.vector.numpy_flat.ann import AnnConfig
    from lanes.vector.numpy_flat.index import FlatIndex, VectorFilter, build_for_store
    from lanes.vector.numpy_flat.writer import FlatVectorWriter

    spec = LaneSpec(name="v", kind=LaneKind.VECTOR, backend="numpy_flat")
    store = FlatVectorWriter(spec, LaneResources(home=tmp, embedder=_Named()))
    chunks = _chunks(m, years)

    async def write() -> None:
        await store.open()
        for s in range(0, len(chunks), 256):
            await store.upsert(chunks[s : s + 256])
        await store.aclose()

    t0 = time.perf_counter()
    asyncio.run(write())
    write_s = time.perf_counter() - t0
    cfg = AnnConfig(min_rows=1) if ann else None
    t0 = time.perf_counter()
    if cfg is not None:
        build_for_store(store.path, cfg)
    index_s = time.perf_counter() - t0
    index = FlatIndex(store.path, cfg)
    t0 = time.perf_counter()
    index.snapshot()
    load_s = time.perf_counter() - t0
    if cfg is not None and index.snapshot().graph is None:
        raise RuntimeError("the accelerator's graph was not loaded")
    got, ts = _time(lambda q: [int(r) for r, _ in index.search(q.tolist(), K)], qs)
    flt = VectorFilter(year_from=YEARS[0], year_to=YEARS[1])
    fgot, fts = _time(lambda q: [int(r) for r, _ in index.search(q.tolist(), K, flt)], qs)
    extra = {f"with_encoding_{k}": v for k, v in _encode_and_search(index, texts).items()} if texts else {}
    return {"write_s": round(write_s, 2), "index_s": round(index_s, 2), "load_s": round(load_s, 3), "results": got,
            "times": ts,
            "filtered_results": fgot, "filtered_times": fts, **extra}  # fmt: skip


def _lancedb(m: np.ndarray, years: np.ndarray, qs: np.ndarray, tmp: Path, *, index: bool) -> dict[str, Any]:
    """The ``lancedb`` backend (:mod:`lanes.vector.lancedb`): written in batches of 256 through its writer, as
    ``fabric ingest`` writes it; ``index``: its ``finish`` builds the ANN index (``index_s``), else it stays exact."""
    import lancedb  # noqa: F401  (ImportError: the candidate is skipped)

    from fabric.core.models import BoundConstraints, LaneKind
    from lanes.base import LaneResources, LaneSpec
    from lanes.vector.lancedb.lane import nearest, vector_where
    from lanes.vector.lancedb.store import LanceOptions, connect, open_table
    from lanes.vector.lancedb.writer import LanceWriter

    options = {"index_min_rows": 1 if index else len(m) + 1}
    spec = LaneSpec(name="v", kind=LaneKind.VECTOR, backend="lancedb", options=options)
    store = LanceWriter(spec, LaneResources(home=tmp, embedder=_Named()))
    chunks = _chunks(m, years)

    async def write() -> dict[str, Any]:
        await store.open()
        for s in range(0, len(chunks), 256):
            await store.upsert(chunks[s : s + 256])
        t0 = time.perf_counter()
        done = await store.finish()
        done["index_s"] = time.perf_counter() - t0
        await store.aclose()
        return done

    t0 = time.perf_counter()
    done = asyncio.run(write())
    write_s = time.perf_counter() - t0 - done["index_s"]
    table = open_table(connect(store.folder), store.folder, store.name)
    opts = LanceOptions.parse(spec)
    where = vector_where(
        BoundConstraints(
            date_from=datetime(YEARS[0], 1, 1, tzinfo=UTC), date_to=datetime(YEARS[1], 12, 31, tzinfo=UTC)
        ),
        None,
    )

    def search(q: np.ndarray, flt: str | None = None) -> list[int]:
        return [int(row["id"]) for _, row in nearest(table, q.tolist(), K, flt, opts, ("id",))]

    got, ts = _time(search, qs)
    fgot, fts = _time(lambda q: search(q, where), qs)
    return {"write_s": round(write_s, 2), "index_s": round(done["index_s"], 2), "results": got, "times": ts,
            "filtered_results": fgot, "filtered_times": fts}  # fmt: skip


def _hnswlib(m: np.ndarray, years: np.ndarray, qs: np.ndarray, efs: Sequence[int]) -> dict[str, Any]:
    import hnswlib

    t0 = time.perf_counter()
    idx = hnswlib.Index(space="cosine", dim=m.shape[1])
    idx.init_index(max_elements=len(m), ef_construction=200, M=16)
    idx.add_items(m, np.arange(len(m)), num_threads=1)
    out: dict[str, Any] = {"write_s": round(time.perf_counter() - t0, 2), "by_ef": {}}
    allowed = (years >= YEARS[0]) & (years <= YEARS[1])
    for ef in efs:
        idx.set_ef(max(ef, K))
        got, ts = _time(lambda q: idx.knn_query(q, k=K, num_threads=1)[0][0].tolist(), qs)
        fgot, fts = _time(
            lambda q: idx.knn_query(q, k=K, num_threads=1, filter=lambda i: bool(allowed[i]))[0][0].tolist(), qs
        )
        out["by_ef"][max(ef, K)] = {"results": got, "times": ts, "filtered_results": fgot, "filtered_times": fts}
    return out


def _usearch(m: np.ndarray, years: np.ndarray, qs: np.ndarray, efs: Sequence[int]) -> dict[str, Any]:
    from usearch.index import Index

    t0 = time.perf_counter()
    idx = Index(ndim=m.shape[1], metric="cos", dtype="f32", connectivity=16, expansion_add=200)
    idx.add(np.arange(len(m)), m, threads=1)
    out: dict[str, Any] = {"write_s": round(time.perf_counter() - t0, 2), "by_ef": {}}
    allowed = (years >= YEARS[0]) & (years <= YEARS[1])

    def filtered(q: np.ndarray) -> list[int]:  # no predicate in the Python API: over-fetch, then filter
        keys = idx.search(q, K * 10, threads=1).keys
        return [int(x) for x in keys if allowed[int(x)]][:K]

    for ef in efs:
        idx.expansion_search = max(ef, K)
        got, ts = _time(lambda q: [int(x) for x in idx.search(q, K, threads=1).keys], qs)
        fgot, fts = _time(filtered, qs)
        out["by_ef"][max(ef, K)] = {"results": got, "times": ts, "filtered_results": fgot, "filtered_times": fts}
    return out


def _qdrant(m: np.ndarray, years: np.ndarray, qs: np.ndarray, tmp: Path) -> dict[str, Any]:
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(tmp / "qdrant"))
    client.create_collection("v", vectors_config=models.VectorParams(size=m.shape[1], distance=models.Distance.COSINE))
    t0 = time.perf_counter()
    for s in range(0, len(m), 256):
        points = [models.PointStruct(id=i, vector=m[i].tolist(), payload={"year": int(years[i])})
                  for i in range(s, min(s + 256, len(m)))]  # fmt: skip
        client.upsert("v", points=points, wait=True)
    write_s = time.perf_counter() - t0
    flt = models.Filter(must=[models.FieldCondition(key="year", range=models.Range(gte=YEARS[0], lte=YEARS[1]))])
    got, ts = _time(lambda q: [int(p.id) for p in client.query_points("v", query=q.tolist(), limit=K).points], qs)
    fgot, fts = _time(
        lambda q: [int(p.id) for p in client.query_points("v", query=q.tolist(), query_filter=flt, limit=K).points],
        qs,
    )
    client.close()
    return {"write_s": round(write_s, 2), "results": got, "times": ts, "filtered_results": fgot, "filtered_times": fts}


def _summary(raw: dict[str, Any], truth: list[set[int]], ftruth: list[set[int]]) -> dict[str, Any]:
    out = {k: v for k, v in raw.items() if k.endswith("_s") or k.startswith("with_encoding_")}
    if "by_ef" in raw:
        out["by_ef"] = {ef: _summary(r, truth, ftruth) for ef, r in raw["by_ef"].items()}
        return out
    out["p50_ms"], out["p95_ms"] = _pct(raw["times"])
    out["filtered_p50_ms"], out["filtered_p95_ms"] = _pct(raw["filtered_times"])
    out["recall_at_100"] = _recall(raw["results"], truth)
    out["filtered_recall_at_100"] = _recall(raw["filtered_results"], ftruth)
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every candidate at every size; figures per size and candidate."""
    dataset = Path(args.dataset)
    qs = query_vectors(dataset, args.queries)
    names = [c for c in args.candidates.split(",") if c] + (["qdrant_local"] if args.qdrant else [])
    names += ["lancedb_ivf_hnsw_sq"] if args.lance_index else []
    efs = [int(x) for x in args.ef.split(",")]
    report: dict[str, Any] = {"queries": len(qs), "k": K, "filter_years": list(YEARS)}
    for size in (int(x) for x in args.sizes.split(",")):
        m, real = load_vectors(dataset, size)
        years = (1990 + np.arange(size) % 30).astype(np.int64)
        allowed = (years >= YEARS[0]) & (years <= YEARS[1])
        truth, ftruth = _exact(m, qs), _exact(m, qs, allowed)
        row: dict[str, Any] = {"entries": size, "real_vectors": real, "filtered_share": round(float(allowed.mean()), 3)}
        for name in names:
            with tempfile.TemporaryDirectory(prefix="vstores-") as tmp:
                try:
                    raw = _candidate(name, m, years, qs, Path(tmp), efs, args)
                except ImportError as exc:
                    row[name] = {"skipped": f"not installed: {exc.name}"}
                    continue
            row[name] = _summary(raw, truth, ftruth)
        report[str(size)] = row
    return report


def _candidate(
    name: str, m: np.ndarray, years: np.ndarray, qs: np.ndarray, tmp: Path, efs: Sequence[int], args: Any
) -> dict[str, Any]:
    if name == "numpy_flat":
        texts = query_texts(Path(args.dataset), len(qs)) if args.with_encoding else ()
        return _numpy_flat(m, years, qs, tmp, texts)
    if name == "numpy_flat_ann":
        texts = query_texts(Path(args.dataset), len(qs)) if args.with_encoding else ()
        return _numpy_flat(m, years, qs, tmp, texts, ann=True)
    if name == "lancedb":
        return _lancedb(m, years, qs, tmp, index=False)
    if name == "lancedb_ivf_hnsw_sq":
        return _lancedb(m, years, qs, tmp, index=True)
    if name == "hnswlib":
        return _hnswlib(m, years, qs, efs)
    if name == "usearch":
        return _usearch(m, years, qs, efs)
    if name == "qdrant_local":
        return _qdrant(m, years, qs, tmp)
    raise SystemExit(f"unknown candidate {name!r}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print JSON (the default prints JSON too)")
    print(json.dumps(run(parser.parse_args()), indent=2))
