"""Fusion + ranking + dedup latency for 6 × 50 and 2 × 50 synthetic hits, next to a plain-RRF floor.

Hits are realistic and overlapping: a pool of documents over 24 domains (Wikipedia, GitHub, news sites, ...),
titles, ~50-word bodies, URLs with tracking parameters, dates spread over two years, ~6 % near-duplicate copies
and ~6 % same-page copies under tracking URLs; each lane draws 50 of them from a shared relevant set plus its own
tail, best first. Like the embedded lanes' hits, they carry the features ingestion stores with each chunk
(quality, SimHash, URL key, title key). The generator is :mod:`tests.support.hits`, which tests share.

Every timed call gets freshly built outcomes (new hit objects and new strings, rebuilt from plain data outside
the timing, as a lane builds them from its store), so nothing fusion computes (string hashes included) carries
over between calls. Every figure comes from the same run: ``floor_*`` is a plain 15-line RRF (ids →
``Σ 1/(60 + rank)`` → sort) over the same outcomes. The timed functions take turns call by call, so fusion and
its floor are measured over the same minutes (the machine's speed drifts; a ratio of figures taken one after the
other would measure the drift). The timed call is ``fuse(...)`` plus reading the first page of
10 items (items are frozen lazily); ``p50_us_*_all_items`` freezes every item, ``p50_us_*_no_dedup`` skips
cross-lane deduplication (fusion + ranking only), ``p50_us_*_cold`` gives fusion hits without the stored dedup
features (SimHash, URL and title keys), as a web lane returns them, so dedup computes them in the call.
``dedup_2000_ms`` deduplicates 2,000 distinct candidates whose features were stored at ingest;
``dedup_2000_cold_ms`` computes every feature in the call.

``fusion_share_of_query`` puts fusion's cost next to a real query's: ``p50_us_6x50`` over the p50 of embedded
SciFact queries (``--scifact``, default ``../shared/datasets/scifact`` beside the checkout, when present). The
corpus is ingested once into a scratch home under ``FABRIC_CACHE_DIR`` (the eval harness's, reused by ``fabric
eval``); each query runs once through the real engine with its offline lanes, its text encoded by the model on
every query (the engine gets an empty embedding cache, so no query vector is read back). ``query_p50_ms`` is the
engine's ``total_ms``, ``query_fusion_p50_us`` the ``fusion_ms`` it measured around its own ``fuse`` call."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import pickle
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from fabric.core.models import Hit, LaneKind, LaneOutcome, LaneStatus, Mode, SearchRequest
from fabric.settings import FusionConfig, Settings, load_settings
from fusion.combine import collect
from fusion.dedup import Deduplicator
from fusion.pipeline import FusionContext, fuse
from tests.support.hits import NOW, document_pool, make_outcomes

__all__ = ["add_arguments", "plain_rrf", "run"]

SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"
"""Where SciFact is read at run time (``../shared/datasets/scifact`` beside the checkout; never copied into it)."""

_COLD: dict[str, Any] = {"simhash": None, "url_key": None, "title_key": None}
"""The dedup features a hit from a web lane lacks (fusion computes them)."""
_FIELDS = tuple(f.name for f in dataclasses.fields(Hit) if f.name != "metadata")


def _own(value: object) -> object:
    """A string as a distinct object (a store returns one per row and field), anything else as it is.

    Only exact strs: a ``StrEnum`` member (``source_kind``, ``trust``) stays the member it is.
    """
    return (value + " ")[:-1] if type(value) is str else value


def _freeze(outcomes: Mapping[str, LaneOutcome], cold: bool = False) -> list[bytes]:
    """The outcomes as plain data, rebuilt into fresh objects by :func:`_thaw` before each timed call."""
    lanes = []
    for o in outcomes.values():
        hits = [replace(h, **_COLD) if cold else h for h in o.hits]
        rows = [tuple(_own(getattr(h, f)) for f in _FIELDS) for h in hits]
        lanes.append(pickle.dumps((o.lane, o.kind, o.status, o.weight, rows)))
    return lanes


def _thaw(frozen: list[bytes]) -> dict[str, LaneOutcome]:
    """Fresh outcomes (new hits, new strings) from :func:`_freeze`'s data, as a lane builds them from its store."""
    out: dict[str, LaneOutcome] = {}
    for data in frozen:
        lane, kind, status, weight, rows = pickle.loads(data)
        hits = tuple(Hit(**dict(zip(_FIELDS, row, strict=True))) for row in rows)
        out[lane] = LaneOutcome(lane=lane, kind=kind, provider="synthetic", status=status, hits=hits, weight=weight)
    return out


def plain_rrf(outcomes: Mapping[str, LaneOutcome], k: int = 60) -> list[tuple[str, float]]:
    """The floor: a plain 15-line RRF over the same outcomes (no weights, boosts or dedup)."""
    scores: dict[str, float] = {}
    for out in outcomes.values():
        for rank, hit in enumerate(out.hits, 1):
            scores[hit.id] = scores.get(hit.id, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


Timed = tuple[Callable[[dict[str, LaneOutcome]], object], list[bytes]]
"""A function timed on fresh outcomes thawed from the frozen data."""


def _time_us(timed: Mapping[str, Timed], repeat: int, every: Mapping[str, int] | None = None) -> dict[str, list[float]]:
    """Sorted wall times in µs per name, each call on freshly thawed outcomes (thawing is not timed).

    The functions take turns, call by call, so each figure covers the same minutes of the machine: on a shared
    machine whose speed drifts by ±30 % within minutes, the ratio of two figures timed one after the other would
    measure the drift. ``every[name] = k`` times that function on every k-th round only.
    """
    every = every or {}
    for name, (fn, frozen) in timed.items():
        for _ in range(max(5, repeat // 20 // every.get(name, 1))):
            fn(_thaw(frozen))
    samples: dict[str, list[float]] = {name: [] for name in timed}
    for i in range(repeat):
        for name, (fn, frozen) in timed.items():
            if i % every.get(name, 1):
                continue
            outcomes = _thaw(frozen)
            t0 = time.perf_counter_ns()
            fn(outcomes)
            samples[name].append((time.perf_counter_ns() - t0) / 1000.0)
    return {name: sorted(values) for name, values in samples.items()}


def _pct(samples: list[float], q: float) -> float:
    return round(samples[min(len(samples) - 1, int(q * len(samples)))], 1)


def _dedup_ms(ctx: FusionContext, cold: bool, repeat: int) -> float:
    docs = document_pool(random.Random(11), 2000)  # 2,000 distinct ids, ≈ 12 % of them duplicates of another
    hits = tuple(replace(d, rank=r, score=1.0 / r) for r, d in enumerate(docs, 1))
    outcomes = {"big": LaneOutcome(lane="big", kind=LaneKind.WEB, provider="synthetic", status=LaneStatus.SUCCESS,
                                   hits=hits)}  # fmt: skip
    frozen = _freeze(outcomes, cold)
    stage = Deduplicator(ctx.config.dedup)
    times = []
    for _ in range(repeat):
        run, cands = collect(_thaw(frozen), ctx)
        assert len(cands) == 2000
        t0 = time.perf_counter_ns()
        stage(cands, run)
        times.append((time.perf_counter_ns() - t0) / 1e6)
    return round(statistics.median(times), 2)


def _page(ctx: FusionContext, outcomes: Mapping[str, LaneOutcome]) -> object:
    return fuse(outcomes, ctx).items[:10]


def _all_items(ctx: FusionContext, outcomes: Mapping[str, LaneOutcome]) -> object:
    return tuple(fuse(outcomes, ctx).items)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--repeat N`` fusion calls per configuration."""
    parser.add_argument("--repeat", type=int, default=2000, help="fusion calls per configuration (default 2000)")
    parser.add_argument("--scifact", type=Path, default=SCIFACT, help="SciFact (BEIR) folder for the query share")
    parser.add_argument("--queries", type=int, default=60, help="SciFact queries timed for the share (default 60)")


async def _scifact_queries(settings: Settings, root: Path, limit: int) -> tuple[list[float], list[float]]:
    """Engine ``total_ms`` and ``fusion_ms`` of ``limit`` SciFact train queries (each run once, after 3 warm-ups)."""
    from fabric.eval.dataset import load_dataset
    from fabric.eval.harness import (
        default_lanes,
        eval_settings,
        ingest_dataset,
        ingest_settings,
        open_engine,
        prepare_home,
    )

    dataset = load_dataset(root, "train")
    lanes = default_lanes(settings)
    home = await prepare_home(ingest_settings(settings), dataset, dataset.corpus_hash(), ingest_dataset)
    totals: list[float] = []
    fusion: list[float] = []
    with tempfile.TemporaryDirectory(prefix="fabric-bench-") as empty:
        # An empty embedding cache: the query vectors are computed by the model in every query.
        run_settings = dataclasses.replace(
            eval_settings(settings, home=home, top_k=10, lanes=lanes), cache_dir=Path(empty)
        )
        async with open_engine(run_settings) as engine:
            for i, q in enumerate(dataset.queries[: limit + 3]):
                result = await engine.search(
                    SearchRequest(query=q.text, mode=Mode.RESEARCH, top_k=10, lanes=tuple(lanes), route="all")
                )
                if i >= 3:
                    totals.append(result.timings["total_ms"])
                    fusion.append(result.timings["fusion_ms"] * 1000.0)
    return totals, fusion


def _query_share(settings: Settings, args: argparse.Namespace, fusion_p50_us: float) -> dict[str, Any]:
    """``fusion_share_of_query`` and the SciFact query figures (empty when the dataset is not at hand)."""
    root = getattr(args, "scifact", None)  # absent: a caller that did not ask for the query share
    if root is None:
        return {"fusion_share_of_query": None, "query_note": "no SciFact folder given"}
    root = Path(root)
    if not (root / "corpus.jsonl").is_file():
        return {"fusion_share_of_query": None, "query_note": f"no SciFact corpus at {root}"}
    totals, fusion = asyncio.run(_scifact_queries(settings, root, max(5, int(getattr(args, "queries", 60)))))
    query_p50 = statistics.median(totals)
    return {
        "query_p50_ms": round(query_p50, 2),
        "query_fusion_p50_us": round(statistics.median(fusion), 1),
        "queries_timed": len(totals),
        "fusion_share_of_query": round(fusion_p50_us / 1000.0 / query_p50, 4),
        "query_fusion_share": round(statistics.median(f / 1000.0 / t for f, t in zip(fusion, totals, strict=True)), 4),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Measure and return the figures."""
    try:
        settings = load_settings()
    except Exception:  # the bench still runs on defaults without a config folder
        settings = Settings()
    cfg: FusionConfig = settings.fusion
    ctx = FusionContext(config=cfg, now=NOW, authority=settings.authority, authority_default=settings.authority_default)
    plain = dataclasses.replace(ctx, dedup=False)
    repeat = max(20, int(args.repeat))
    figures: dict[str, Any] = {}
    for lanes in (6, 2):
        outcomes = make_outcomes(lanes, 50)
        frozen = _freeze(outcomes)
        times = _time_us(
            {
                "fused": (partial(_page, ctx), frozen),
                "floor": (plain_rrf, frozen),
                "full": (partial(_all_items, ctx), frozen),
                "no_dedup": (partial(_page, plain), frozen),
                "cold": (partial(_page, ctx), _freeze(outcomes, cold=True)),
            },
            repeat,
            every={"full": 4, "no_dedup": 4, "cold": 4},
        )
        fused, floor, full, no_dedup, cold = (times[k] for k in ("fused", "floor", "full", "no_dedup", "cold"))
        out = fuse(outcomes, ctx)
        tag = f"{lanes}x50"
        figures[f"p50_us_{tag}"] = _pct(fused, 0.5)
        figures[f"p99_us_{tag}"] = _pct(fused, 0.99)
        figures[f"floor_p50_us_{tag}"] = _pct(floor, 0.5)
        figures[f"p50_us_{tag}_all_items"] = _pct(full, 0.5)
        figures[f"p50_us_{tag}_no_dedup"] = _pct(no_dedup, 0.5)
        figures[f"p50_us_{tag}_cold"] = _pct(cold, 0.5)
        figures[f"ratio_to_floor_{tag}"] = round(_pct(fused, 0.5) / max(_pct(floor, 0.5), 1e-9), 2)
        figures[f"items_{tag}"] = len(out.items)
        figures[f"duplicates_merged_{tag}"] = sum(out.duplicates.values())
    figures["dedup_2000_ms"] = _dedup_ms(ctx, cold=False, repeat=max(5, repeat // 200))
    figures["dedup_2000_cold_ms"] = _dedup_ms(ctx, cold=True, repeat=max(3, repeat // 400))
    figures.update(_query_share(settings, args, figures["p50_us_6x50"]))
    return figures
