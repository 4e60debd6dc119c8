"""Embedded default on a BEIR dataset: ingest docs/s per stage, per-lane nDCG@10, engine p50/p95 and fused nDCG@10.

``fabric bench embedded --dataset ../shared/datasets/scifact [--split train] [--home DIR] [--queries N]``

Ingests the corpus into ``--home`` (a scratch folder by default; re-runs on the same home are idempotent and
reuse the embedding cache under ``FABRIC_CACHE_DIR``), then runs every query of the split through the keyword
lane alone, the vector lane alone, and the full engine (all enabled lanes, concurrency 1), reporting nDCG@10
for each and the engine's latency percentiles. A small stand-in until ``fabric eval`` covers lanes alone.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["add_arguments", "ndcg_at_10", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the benchmark."""
    parser.add_argument("--dataset", required=True, help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/)")
    parser.add_argument("--split", default="train", help="qrels split (default: train)")
    parser.add_argument("--home", help="store folder to (re)use; default: a scratch folder removed afterwards")
    parser.add_argument("--queries", type=int, default=0, help="limit the number of queries (0: all)")


def ndcg_at_10(ranked: list[str], rels: dict[str, int]) -> float:
    """nDCG@10 with graded relevance and log2 discounts (the BEIR/trec_eval definition)."""
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(rels.values(), reverse=True)[:10]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def _load(dataset: Path, split: str) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    queries = {}
    for line in (dataset / "queries.jsonl").read_text().splitlines():
        row = json.loads(line)
        queries[str(row["_id"])] = str(row["text"])
    qrels: dict[str, dict[str, int]] = {}
    for line in (dataset / "qrels" / f"{split}.tsv").read_text().splitlines()[1:]:
        q, d, r = line.split("\t")[:3]
        qrels.setdefault(q, {})[d] = int(r)
    return queries, qrels


async def _bench(settings: Any, dataset: Path, split: str, limit: int) -> dict[str, Any]:
    from fabric.commands.ingest import run_ingest
    from fabric.engine import Engine
    from fabric.errors import LaneError
    from fabric.models import LaneRequest, SearchRequest

    report = (await run_ingest(settings, dataset, "beir")).to_dict()
    queries, qrels = _load(dataset, split)
    items = [(q, rels) for q, rels in qrels.items() if q in queries][: limit or None]
    out: dict[str, Any] = {"ingest": report, "queries": len(items)}
    async with Engine(settings) as engine:
        for name in ("keyword", "vector"):
            lane = engine.lanes.get(name)
            if lane is None:
                continue
            scores = []
            try:
                for q, rels in items:
                    hits = await lane.search(LaneRequest(query=queries[q], top_k=10))
                    scores.append(ndcg_at_10([h.doc_id or h.id for h in hits], rels))
            except LaneError as exc:  # e.g. no embedder: the lane alone cannot be measured
                out[f"ndcg@10.{name}"] = f"unavailable: {exc}"
                continue
            out[f"ndcg@10.{name}"] = round(sum(scores) / len(scores), 4)
        latencies, scores = [], []
        for q, rels in items:
            t0 = time.perf_counter()
            res = await engine.search(SearchRequest(query=queries[q], top_k=10))
            latencies.append((time.perf_counter() - t0) * 1000)
            scores.append(ndcg_at_10([it.hit.doc_id or it.id for it in res.items], rels))
    latencies.sort()
    out["ndcg@10.fused"] = round(sum(scores) / len(scores), 4)
    out["search_p50_ms"] = round(latencies[len(latencies) // 2], 1)
    out["search_p95_ms"] = round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))], 1)
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark; returns the figures."""
    from fabric.commands.search import load_cli_settings

    settings = load_cli_settings(args)
    scratch = None if args.home else Path(tempfile.mkdtemp(prefix="fabric-bench-"))
    home = Path(args.home) if args.home else scratch / "home"  # type: ignore[operator]
    settings = dataclasses.replace(settings, home=home)
    try:
        return asyncio.run(_bench(settings, Path(args.dataset), args.split, args.queries))
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
