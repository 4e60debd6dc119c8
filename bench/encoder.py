"""MiniLM inference runtimes side by side: one query's encoding, document throughput, vector agreement.

``fabric bench encoder [--json] [--dataset /work/shared/datasets/scifact] [--queries 200] [--docs 0]
[--runtimes torch,onnx,onnx-int8,openvino]``

Every runtime of ``[embeddings] runtime`` (:mod:`fabric.embed.minilm`) is loaded without the embedding cache, so every
text is encoded. Single queries (SciFact's, one at a time) are timed *interleaved*: query *i* goes through every
runtime before query *i + 1*, in a rotating order, so the machine's load weighs on all of them alike and the
ratios (``ratio_vs_torch``) hold even on a busy machine; ``loadavg_1m`` before and after says how busy it was.
Documents (title and abstract, the first ``--docs`` or all 5,183) are then embedded by each runtime in turn
(``docs_per_s``). Agreement with torch: ``cos_min`` / ``cos_mean`` of the same text's vectors, and the overlap of
each query's top 10 among the documents when the runtime encodes the queries and the documents
(``top10_overlap_both``) or only the queries, against torch's document vectors (``top10_overlap_queries_only``):
the second is a home ingested with torch and queried with the runtime.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the benchmark."""
    parser.add_argument("--dataset", default="/work/shared/datasets/scifact", help="BEIR folder (corpus, queries)")
    parser.add_argument("--queries", type=int, default=200, help="queries timed one at a time (default 200)")
    parser.add_argument("--docs", type=int, default=0, help="documents embedded per runtime (0: all)")
    parser.add_argument("--runtimes", default="torch,onnx,onnx-int8,openvino", help="comma separated, torch first")


def _texts(dataset: Path, queries: int, docs: int) -> tuple[list[str], list[str]]:
    with (dataset / "queries.jsonl").open(encoding="utf-8") as fh:
        qs = [str(json.loads(line)["text"]) for line in fh if line.strip()][:queries]
    ds: list[str] = []
    with (dataset / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip() and (docs <= 0 or len(ds) < docs):
                row = json.loads(line)
                ds.append(f"{row.get('title', '')} {row.get('text', '')}".strip())
    return qs, ds


def _embedders(runtimes: list[str], cache_dir: Path) -> dict[str, Any]:
    from fabric.core.errors import QueryError
    from fabric.embed.minilm import minilm_embedder
    from fabric.settings.sections import EmbeddingsConfig

    out: dict[str, Any] = {}
    for name in runtimes:
        emb = minilm_embedder(EmbeddingsConfig(runtime=name), cache_dir)
        if emb is None:
            raise QueryError("runtimes", f"{name!r} is unavailable (packages or weights missing)")
        getattr(emb, "warm", lambda: None)()
        out[name] = emb
    return out


def _pct(xs: list[float]) -> dict[str, float]:
    a = np.asarray(xs) * 1000.0
    return {"p50_ms": round(float(np.percentile(a, 50)), 2), "p95_ms": round(float(np.percentile(a, 95)), 2)}


def _time_queries(embs: dict[str, Any], queries: list[str]) -> tuple[dict[str, list[float]], dict[str, Any]]:
    names = list(embs)
    times: dict[str, list[float]] = {n: [] for n in names}
    vectors: dict[str, list[list[float]]] = {n: [] for n in names}
    for i, q in enumerate(queries):
        for k in range(len(names)):
            name = names[(i + k) % len(names)]
            t0 = time.perf_counter()
            vec = embs[name].embed([q])[0]
            times[name].append(time.perf_counter() - t0)
            vectors[name].append(vec)
    return times, {n: np.asarray(v, dtype=np.float32) for n, v in vectors.items()}


def _overlap(q: np.ndarray, d: np.ndarray, ref: np.ndarray) -> float:
    k = min(10, d.shape[0])
    mine = np.argsort(-(q @ d.T), axis=1)[:, :k]
    return round(float(np.mean([len(set(a) & set(b)) / k for a, b in zip(mine, ref, strict=True)])), 4)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Time and compare the runtimes; returns the ``--json`` payload."""
    from fabric.core.errors import QueryError

    runtimes = [r.strip() for r in str(args.runtimes).split(",") if r.strip()]
    if not runtimes or args.queries <= 0:
        raise QueryError("runtimes", "--runtimes and --queries must name at least one runtime and one query")
    queries, docs = _texts(Path(args.dataset), args.queries, args.docs)
    load_before = os.getloadavg()[0]
    cache_dir = Path(os.environ.get("FABRIC_CACHE_DIR", tempfile.gettempdir()))  # the ONNX export is cached here
    embs = _embedders(runtimes, cache_dir)
    times, qvecs = _time_queries(embs, queries)
    dvecs: dict[str, np.ndarray] = {}
    out: dict[str, Any] = {"queries": len(queries), "docs": len(docs), "runtimes": {}}
    for name, emb in embs.items():
        t0 = time.perf_counter()
        dvecs[name] = np.asarray(emb.embed(docs), dtype=np.float32)
        seconds = time.perf_counter() - t0
        out["runtimes"][name] = {**_pct(times[name]), "docs_s": round(seconds, 1)}
        out["runtimes"][name]["docs_per_s"] = round(len(docs) / seconds, 1) if seconds > 0 else None
    base = runtimes[0]
    ref = np.argsort(-(qvecs[base] @ dvecs[base].T), axis=1)[:, : min(10, len(docs))]
    for name, row in out["runtimes"].items():
        row["ratio_vs_" + base] = round(row["p50_ms"] / out["runtimes"][base]["p50_ms"], 3)
        cos = np.concatenate([(qvecs[name] * qvecs[base]).sum(1), (dvecs[name] * dvecs[base]).sum(1)])
        row["cos_min"], row["cos_mean"] = round(float(cos.min()), 5), round(float(cos.mean()), 6)
        row["top10_overlap_both"] = _overlap(qvecs[name], dvecs[name], ref)
        row["top10_overlap_queries_only"] = _overlap(qvecs[name], dvecs[base], ref)
    out["loadavg_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    return out
