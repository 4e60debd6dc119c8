"""The embedded default at 50K entries: ingest time per stage and search latency with the query's own encoding.

``fabric bench scale [--json] [--dataset /work/shared/datasets/scifact] [--queries 200] [--abstracts 0]``

Builds the scale corpus at run time (:mod:`bench.scale_corpus`: SciFact abstracts as 50,315 passages, qrels
mapped to passages) in a scratch folder, ingests it into a fresh home with the default lanes (embeddings from
the content-hash cache under ``FABRIC_CACHE_DIR``; missing ones are computed and cached), then runs queries one
at a time through the engine. The engine's embedder uses an empty cache of its own, so every query is encoded
cold inside the timed call. Prints ``entries``, ``write_s`` (the write stage), ``c1_p50_ms``, ``c1_p95_ms``, the
other ingest stages, the encoding floor (MiniLM on the same queries, nothing else) and nDCG@10 over passages.
The open-loop load against ``fabric serve`` is not part of this bench yet.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the benchmark."""
    parser.add_argument("--dataset", default="/work/shared/datasets/scifact", help="SciFact BEIR folder")
    parser.add_argument("--split", default="train", help="qrels split (default: train)")
    parser.add_argument("--queries", type=int, default=200, help="judged queries timed at concurrency 1")
    parser.add_argument("--abstracts", type=int, default=0, help="use the first N abstracts only (0: all)")
    parser.add_argument("--keep", help="build the corpus and home in this folder and keep them")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))], 2)


def _queries(root: Path, split: str, limit: int) -> list[tuple[str, str, dict[str, int]]]:
    texts = {}
    for line in (root / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            texts[str(row["_id"])] = str(row["text"])
    qrels: dict[str, dict[str, int]] = {}
    for line in (root / "qrels" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        q, d, r = line.split("\t")[:3]
        qrels.setdefault(q, {})[d] = int(r)
    return [(q, texts[q], rels) for q, rels in qrels.items() if q in texts][:limit]


def _encoding_floor(settings: Any, texts: list[str]) -> tuple[float, float]:
    """p50/p95 ms of MiniLM alone encoding each query (no cache), as the engine's lane would."""
    from fabric.embeddings import MiniLMEmbedder

    model = MiniLMEmbedder(name=settings.embeddings.model)
    model.warm()
    times = []
    for text in texts:
        t0 = time.perf_counter()
        model.embed([text])
        times.append((time.perf_counter() - t0) * 1000)
    return _pct(times, 0.5), _pct(times, 0.95)


async def _search(settings: Any, items: list[tuple[str, str, dict[str, int]]]) -> dict[str, Any]:
    from fabric.engine import Engine
    from fabric.eval.metrics import query_metrics
    from fabric.models import SearchRequest

    times, ndcg, empty = [], [], 0
    async with Engine(settings) as engine:
        for _, text, rels in items:
            t0 = time.perf_counter()
            res = await engine.search(SearchRequest(query=text, top_k=10))
            times.append((time.perf_counter() - t0) * 1000)
            ranking = [it.hit.id or it.id for it in res.items]
            empty += not ranking
            ndcg.append(query_metrics(ranking, rels)["ndcg_at_10"])
    return {
        "c1_p50_ms": _pct(times, 0.5), "c1_p95_ms": _pct(times, 0.95),
        "ndcg_at_10_passages": round(sum(ndcg) / max(1, len(ndcg)), 4), "empty_answers": empty,
    }  # fmt: skip


async def _bench(settings: Any, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    from bench.scale_corpus import build_scale_dataset
    from fabric.ingest.run import run_ingest

    t0 = time.perf_counter()
    corpus = build_scale_dataset(Path(args.dataset), work / "dataset", split=args.split, abstracts=args.abstracts)
    build_s = time.perf_counter() - t0
    report = (await run_ingest(settings, corpus.root, "beir")).to_dict()
    seconds = {k: round(v, 2) for k, v in report["seconds"].items()}
    items = _queries(corpus.root, args.split, args.queries)
    cold = dataclasses.replace(settings, cache_dir=work / "query-cache")  # every query encoded inside the call
    out: dict[str, Any] = {
        "entries": report["chunks"], "abstracts": corpus.abstracts, "queries": len(items),
        "write_s": seconds.get("write"), "ingest_seconds": seconds, "corpus_build_s": round(build_s, 2),
        "vectors": report.get("embedded"), "stores": report.get("stores"),
        "vector_backend": next((lc.backend for lc in settings.enabled_lanes() if lc.name == "vector"), None),
    }  # fmt: skip
    out.update(await _search(cold, items))
    if settings.embeddings.backend == "minilm":
        out["encode_p50_ms"], out["encode_p95_ms"] = await asyncio.to_thread(
            _encoding_floor, settings, [t for _, t, _ in items]
        )
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark; returns the figures."""
    from fabric.commands.search import load_cli_settings

    settings = load_cli_settings(args)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="fabric-scale-"))
    settings = dataclasses.replace(settings, home=work / "home")
    try:
        return asyncio.run(_bench(settings, work, args))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
