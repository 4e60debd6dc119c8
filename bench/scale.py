"""The embedded default at 50K entries: ingest per stage, search at concurrency 1, open-loop load on ``fabric serve``.

``fabric bench scale [--json] [--dataset /work/shared/datasets/scifact] [--queries 200] [--abstracts 0]
[--plain | --home DIR] [--rates 25,50,100,150] [--seconds 60] [--warmup-s 5] [--no-load] [--serve-args "..."]
[--replicas N --state-url postgresql://...]``

Builds the scale corpus at run time (:mod:`bench.scale_corpus`: SciFact abstracts as 50,315 passages, qrels
mapped to passages) in a scratch folder, ingests it into a fresh home with the default lanes (embeddings from
the content-hash cache under ``FABRIC_CACHE_DIR``; missing ones are computed and cached), then runs queries one
at a time through the engine. The engine's embedder uses an empty cache of its own, so every query is encoded
cold inside the timed call. Prints ``entries``, ``write_s`` (the write stage), ``c1_p50_ms``, ``c1_p95_ms``, the
other ingest stages, the encoding floor (MiniLM on the same queries, nothing else) and nDCG@10 over passages.
``--plain`` ingests the dataset as it is (SciFact's 5,183 abstracts) instead of passages; ``--home`` uses an
existing home as it is (no ingest; ``write_s`` is null).

Then (unless ``--no-load``) it starts ``fabric serve`` over the home as a child process and drives it open-loop
at each rate for ``--seconds`` (:mod:`bench.openloop`: constant arrivals, every query encoded by the server),
printing under ``load`` one entry per rate with ``rps_target``, ``rps_achieved``, ``p50_ms``, ``p95_ms``,
``p99_ms``, ``errors``, ``rejected``, ``empty_answers``, ``cpu_ms_per_query``, ``rss_mb`` and more. The bench's
own client shares the machine with the server; ``loadavg_1m`` before and after tells how busy the machine was.
``--replicas N --state-url URL`` starts N such children sharing one PostgreSQL database (docs/replicas.md) and
sends request ``k`` to replica ``k mod N``; CPU per query and RSS then add up over the replicas.
``--serve-args "--workers N"`` runs one ``fabric serve --workers N`` instead (N processes on one socket, the
kernel deals out the connections); CPU per query and RSS add up over its process tree.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import shlex
import shutil
import sqlite3
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
    parser.add_argument("--plain", action="store_true", help="ingest the dataset's documents, not passages")
    parser.add_argument("--home", help="an existing home to time and serve as it is (no corpus build, no ingest)")
    parser.add_argument("--rates", default="25,50,100,150", help="open-loop arrival rates, requests per second")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each rate's run (default 60)")
    parser.add_argument("--warmup-s", type=float, default=5.0, help="warm-up at the lowest rate (default 5)")
    parser.add_argument("--no-load", action="store_true", help="skip the open-loop load on fabric serve")
    parser.add_argument("--lanes-alone", action="store_true", help="also time each lane alone at concurrency 1")
    parser.add_argument("--repeat-queries", action="store_true", help="send query texts as they are (cache hits)")
    parser.add_argument("--serve-args", default="", help='extra fabric serve options, e.g. "--max-active 4"')
    parser.add_argument("--route", help="route of the timed queries (default: [router] default_route, as served)")
    parser.add_argument(
        "--replicas", type=int, default=1, help="fabric serve replicas under the load, round robin (default 1)"
    )
    parser.add_argument("--state-url", default="", help="PostgreSQL URL the replicas share (FABRIC_STATE_URL)")


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
    """p50/p95 ms of MiniLM alone (the configured runtime and query weights) encoding each query (no cache), as the
    engine would."""
    from fabric.embed.minilm import minilm_embedder

    model: Any = minilm_embedder(settings.embeddings, settings.cache_dir)
    model.warm()
    encode = getattr(model, "embed_queries", model.embed)
    times = []
    for text in texts:
        t0 = time.perf_counter()
        encode([text])
        times.append((time.perf_counter() - t0) * 1000)
    return _pct(times, 0.5), _pct(times, 0.95)


async def _timed(
    settings: Any, items: list[tuple[str, str, dict[str, int]]], lanes: tuple[str, ...] | None, route: str = "all"
) -> list[Any]:
    """Each query once through a fresh engine over ``settings`` (its own query cache): (ms, result) pairs."""
    from fabric.core.models import SearchRequest
    from fabric.query.engine import Engine

    out = []
    async with Engine(settings) as engine:
        for _, text, _ in items:
            t0 = time.perf_counter()
            res = await engine.search(SearchRequest(query=text, top_k=10, lanes=lanes, route=route))
            out.append(((time.perf_counter() - t0) * 1000, res))
    return out


def _overlap(runs: list[Any]) -> dict[str, Any]:
    """Whether the lanes overlap: per-lane p50s inside the fused query, and p50s of each query's lane window
    (first lane start to last lane end), slowest lane and sum of lanes (overlapping lanes: window ≈ slowest)."""
    per_lane: dict[str, list[float]] = {}
    sums, maxes, windows = [], [], []
    for _, res in runs:
        lat = [o.latency_ms for o in res.lanes.values() if o.status.value == "success"]
        for name, o in res.lanes.items():
            per_lane.setdefault(name, []).append(o.latency_ms)
        if lat:
            sums.append(sum(lat))
            maxes.append(max(lat))
        windows.append(res.timings["lanes_ms"])
    return {
        "c1_lane_p50_ms": {name: _pct(v, 0.5) for name, v in sorted(per_lane.items())},
        "c1_lanes_window_p50_ms": _pct(windows, 0.5), "c1_slowest_lane_p50_ms": _pct(maxes, 0.5),
        "c1_lanes_sum_p50_ms": _pct(sums, 0.5),
    }  # fmt: skip


async def _search(
    settings: Any, items: list[tuple[str, str, dict[str, int]]], cache_root: Path, alone: bool, route: str
) -> dict[str, Any]:
    """Concurrency 1, every query encoded inside the timed call (an empty query cache per engine), on ``route``;
    each lane alone runs unrouted."""
    from fabric.eval.metrics import query_metrics

    runs = await _timed(dataclasses.replace(settings, cache_dir=cache_root / "fused"), items, None, route)
    ndcg, empty = [], 0
    for (_, _, rels), (_, res) in zip(items, runs, strict=True):
        ranking = [it.hit.id or it.id for it in res.items]
        empty += not ranking
        ndcg.append(query_metrics(ranking, rels)["ndcg_at_10"])
    times = [ms for ms, _ in runs]
    out: dict[str, Any] = {
        "route": route, "c1_p50_ms": _pct(times, 0.5), "c1_p95_ms": _pct(times, 0.95),
        "ndcg_at_10_passages": round(sum(ndcg) / max(1, len(ndcg)), 4), "empty_answers": empty, **_overlap(runs),
    }  # fmt: skip
    if alone:  # each lane on its own, query encoding included where the lane encodes
        out["c1_alone_p50_ms"] = {}
        for name in sorted({n for _, res in runs for n in res.lanes}):
            alone_runs = await _timed(dataclasses.replace(settings, cache_dir=cache_root / name), items, (name,))
            out["c1_alone_p50_ms"][name] = _pct([ms for ms, _ in alone_runs], 0.5)
    return out


async def _ingested(settings: Any, work: Path, args: argparse.Namespace) -> tuple[dict[str, Any], Path]:
    """Build the corpus (passages, or the dataset as it is with ``--plain``) and ingest it; figures and its root."""
    from bench.scale_corpus import build_scale_dataset
    from fabric.ingest.run import run_ingest

    t0 = time.perf_counter()
    if args.plain:
        root, abstracts = Path(args.dataset), None
    else:
        corpus = build_scale_dataset(Path(args.dataset), work / "dataset", split=args.split, abstracts=args.abstracts)
        root, abstracts = corpus.root, corpus.abstracts
    build_s = time.perf_counter() - t0
    report = (await run_ingest(settings, root, "beir")).to_dict()
    seconds = {k: round(v, 2) for k, v in report["seconds"].items()}
    return {
        "entries": report["chunks"], "abstracts": abstracts, "write_s": seconds.get("write"),
        "ingest_seconds": seconds, "corpus_build_s": round(build_s, 2), "vectors": report.get("embedded"),
        "stores": report.get("stores"),
    }, root  # fmt: skip


def _stored_entries(home: Path) -> int | None:
    """Chunks in an existing home's keyword store (``<home>/keyword.sqlite``), or None without one."""
    path = home / "keyword.sqlite"
    if not path.is_file():
        return None
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
    finally:
        conn.close()


def _query_texts(root: Path) -> tuple[str, ...]:
    """Every query text of the dataset (the open-loop load cycles through them)."""
    lines = (root / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    return tuple(str(json.loads(line)["text"]) for line in lines if line.strip())


async def _load(settings: Any, root: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The open-loop load on a ``fabric serve`` child over the home (:mod:`bench.openloop`)."""
    from bench.openloop import LoadPlan, ServeProcess, drive

    rates = tuple(float(r) for r in args.rates.split(",") if r.strip())
    plan = LoadPlan(
        queries=_query_texts(root), rates=rates, seconds=args.seconds, warmup_s=args.warmup_s,
        repeat_queries=args.repeat_queries,
    )  # fmt: skip
    serve_args = tuple(shlex.split(args.serve_args))
    replicas = args.replicas  # checked by run()
    with contextlib.ExitStack() as stack:
        servers = [
            stack.enter_context(
                ServeProcess(
                    Path(settings.home), work / f"serve-cache-{i}", serve_args, work / f"serve-{i}.log",
                    args.state_url,
                )
            )
            for i in range(replicas)
        ]  # fmt: skip
        for server in servers:
            await server.ready()
        figures = await drive(servers, plan)
    return {"load": figures, "load_seconds": args.seconds, "serve_args": list(serve_args), "replicas": replicas}


async def _bench(settings: Any, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"loadavg_1m_before": round(os.getloadavg()[0], 2)}
    if args.home:
        root = Path(args.dataset)
        out.update({"entries": _stored_entries(Path(args.home)), "write_s": None, "home": args.home})
    else:
        figures, root = await _ingested(settings, work, args)
        out.update(figures)
    out["vector_backend"] = next((lc.backend for lc in settings.enabled_lanes() if lc.name == "vector"), None)
    items = _queries(root, args.split, args.queries)
    out["queries"] = len(items)
    route = getattr(args, "route", None) or settings.router.default_route
    out.update(await _search(settings, items, work / "query-cache", args.lanes_alone, route))
    if settings.embeddings.backend == "minilm":
        out["encode_p50_ms"], out["encode_p95_ms"] = await asyncio.to_thread(
            _encoding_floor, settings, [t for _, t, _ in items]
        )
    if not args.no_load:
        out.update(await _load(settings, root, work, args))
    out["loadavg_1m_after"] = round(os.getloadavg()[0], 2)
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmark; returns the figures."""
    from fabric.cli.search import load_cli_settings

    if args.replicas < 1 or (args.replicas > 1 and not args.state_url):
        from fabric.core.errors import QueryError

        raise QueryError("bench", "--replicas must be 1, or above 1 with --state-url (their shared PostgreSQL)")
    settings = load_cli_settings(args)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="fabric-scale-"))
    home = Path(args.home) if args.home else work / "home"
    settings = dataclasses.replace(settings, home=home)
    try:
        return asyncio.run(_bench(settings, work, args))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
