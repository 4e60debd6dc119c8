"""Drives an evaluation: the scratch home keyed by corpus hash, the engine, the passes and calibration.

``fabric eval`` and ``fabric tune`` share this module; both stay thin argument-parsing layers.

Scratch homes live under ``settings.cache_dir / "eval-homes" / <dataset>-<key>`` where the key hashes the
corpus content, the embedding model, the stores and the source of the indexing code: a second run on the same
data reuses the built indexes; a changed corpus, model or ingestion code builds a fresh home. A home is used
only once its ``ready.json`` marker exists, so an interrupted ingestion is resumed (ingestion is idempotent)
rather than trusted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabric.core.errors import QueryError
from fabric.core.logs import get_logger
from fabric.core.models import FusionMode, LaneKind, Mode
from fabric.eval.calibration import CalibrationClock
from fabric.eval.dataset import Dataset
from fabric.eval.report import percentile
from fabric.eval.runner import FEDERATION, FUSED, PassResult, SearchEngine, run_pass
from fabric.query.lane_setup import active_confidence
from fabric.settings import Settings

__all__ = [
    "OFFLINE_KINDS",
    "EvalPlan",
    "IngestFn",
    "artifact_config",
    "check_lanes",
    "default_lanes",
    "encoding_times",
    "eval_settings",
    "home_key",
    "index_code_fingerprint",
    "ingest_dataset",
    "ingest_settings",
    "open_engine",
    "prepare_home",
    "run_plan",
    "timed_fused_pass",
]

log = get_logger(__name__)

OFFLINE_KINDS = (LaneKind.KEYWORD, LaneKind.VECTOR, LaneKind.GRAPH)
"""Lane kinds that search the ingested corpus (web, news and markets cannot be judged by qrels)."""

IngestFn = Callable[[Settings, Dataset], Awaitable[None]]
"""Ingests a dataset's corpus into ``settings.home``."""

_READY = "ready.json"


def default_lanes(settings: Settings) -> list[str]:
    """Enabled lanes whose kind searches the local corpus, in config order."""
    return [lane.name for lane in settings.enabled_lanes() if lane.kind in OFFLINE_KINDS]


def check_lanes(settings: Settings, lanes: Sequence[str]) -> list[str]:
    """Validate lane names against the configuration.

    Raises:
        QueryError: naming the unknown lane and the valid ones.
    """
    for lane in lanes:
        if lane not in settings.lanes:
            raise QueryError("lanes", f"unknown lane {lane!r}; valid: {', '.join(settings.lanes)}")
    if not lanes:
        raise QueryError("lanes", "no lane selected")
    return list(lanes)


def eval_settings(settings: Settings, *, home: Path, top_k: int, lanes: Sequence[str]) -> Settings:
    """Settings for an eval run: the scratch home, lanes asked for ``top_k`` hits, the selected lanes enabled,
    no rate-based provider suspension, no pre-flight bypass on event-loop lag, and no cached query vectors."""
    lane_cfgs = {
        name: dataclasses.replace(cfg, enabled=cfg.enabled or name in lanes) for name, cfg in settings.lanes.items()
    }
    # Provider suspension is for production traffic; in an eval one slow moment would suspend a lane for
    # minutes and silently turn the rest of the run into a fallback measurement. `fabric bench` covers it.
    penalties = dataclasses.replace(settings.penalties, failure_rate_suspend=2.0)
    # Pre-flight steps aside under load (event-loop lag): the query then reaches the lanes unrefined (no phrases,
    # no year filters), so on a busy machine the same eval scored differently from run to run (CISI fused
    # nDCG@10 0.434–0.455 with nothing changed). An eval measures the refined path every time.
    preflight = dataclasses.replace(settings.preflight, max_loop_lag_ms=float("inf"))
    engine = dataclasses.replace(
        settings.engine,
        lane_top_k=max(settings.engine.lane_top_k, top_k),
        max_top_k=max(settings.engine.max_top_k, top_k),
    )
    # Every timed query is encoded inside its timed call: a warm-up or an earlier run must not leave
    # its vector in the cache for the timed pass to read.
    embeddings = dataclasses.replace(settings.embeddings, cache_queries=False)
    return dataclasses.replace(
        settings, home=home, engine=engine, lanes=lane_cfgs, penalties=penalties, preflight=preflight,
        embeddings=embeddings,
    )  # fmt: skip


_INDEX_CODE = (
    "fabric/ingest/**/*.py", "lanes/**/*writer*.py", "lanes/**/extract*.py", "lanes/sqlite_common.py",
    "fabric/writers/*.py", "fusion/quality.py", "fusion/simhash.py", "fusion/text.py", "fusion/urls.py",
)  # fmt: skip
"""Source files that decide what an index holds (loaders, chunking, store writers, entity extraction, and the
per-chunk features computed at ingest: quality, SimHash, URL and title keys)."""


def index_code_fingerprint(root: Path | None = None) -> str:
    """SHA-256 over the source of the indexing code, so a home built by older ingestion code is not reused."""
    base = root or Path(__file__).resolve().parents[2]
    digest = hashlib.sha256()
    files = sorted({p for pattern in _INDEX_CODE for p in base.glob(pattern) if p.is_file()})
    for path in files:
        digest.update(path.relative_to(base).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def home_key(settings: Settings, corpus_hash: str) -> str:
    """Cache key of a scratch home: corpus content, embedding model and runtime, stores and the indexing code."""
    emb = settings.embeddings
    stores = sorted((lc.name, lc.backend) for lc in settings.enabled_lanes() if lc.kind in OFFLINE_KINDS)
    parts: list[object] = [corpus_hash, emb.backend, emb.model, emb.url, stores, index_code_fingerprint()]
    if emb.backend == "minilm" and emb.runtime != "torch":
        parts.append(emb.runtime)  # another runtime's document vectors (torch's keys stay as they were)
        if emb.runtime == "openvino":
            from fabric.embed.minilm_runtime import openvino_precision

            parts.append(openvino_precision())  # bf16 on AMX cores, f32 elsewhere: other vectors
    raw = json.dumps(parts, sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


async def prepare_home(
    settings: Settings, dataset: Dataset, corpus_hash: str, ingest: IngestFn, *, home: Path | None = None
) -> Path:
    """Return a home holding the dataset's corpus, ingesting it only when no ready home matches.

    Args:
        settings: loaded settings (``cache_dir`` locates scratch homes).
        dataset: the dataset whose corpus is ingested.
        corpus_hash: :meth:`Dataset.corpus_hash`.
        ingest: the ingestion function.
        home: an explicit home (``--home``); ingestion into it is idempotent, no marker is kept.
    """
    if home is not None:
        await ingest(dataclasses.replace(settings, home=home), dataset)
        return home
    key = home_key(settings, corpus_hash)
    path = settings.cache_dir / "eval-homes" / f"{dataset.name}-{key}"
    marker = path / _READY
    if marker.exists():
        log.info("eval_home_reused", home=str(path), key=key)
        return path
    # An interrupted build is resumed, not wiped: ingestion is idempotent and repairs what is missing.
    path.mkdir(parents=True, exist_ok=True)
    log.info("eval_home_building", home=str(path), key=key, corpus=str(dataset.corpus))
    await ingest(dataclasses.replace(settings, home=path), dataset)
    marker.write_text(json.dumps({"key": key, "corpus_hash": corpus_hash, "dataset": dataset.name}))
    return path


@asynccontextmanager
async def open_engine(settings: Settings) -> AsyncIterator[SearchEngine]:
    """Open the real engine (:class:`fabric.query.engine.Engine`) for the duration of the block."""
    from fabric.query.engine import Engine  # imported here: heavy, and `fabric --help` must stay fast

    engine = Engine(settings)
    async with engine:
        # Load the embedding model before the first query: a lazy load takes seconds, the first queries would
        # time out, and provider penalties would then suspend the vector lane for the whole eval.
        embedder = engine.resources.embedder if engine.resources is not None else None
        if embedder is not None:
            await asyncio.to_thread(embedder.embed, ["warm-up"])
        yield engine


async def encoding_times(engine: Any, texts: Sequence[str]) -> dict[str, float] | None:
    """How long the engine's query model takes to encode each of ``texts`` alone, outside any search: ``p50_ms``
    and ``p95_ms`` (the share of a query's latency that is its encoding). None without an embedder."""
    resources = getattr(engine, "resources", None)
    embedder = getattr(resources, "embedder", None)
    if embedder is None or not texts:
        return None
    encode = getattr(embedder, "embed_queries", embedder.embed)

    def timed() -> list[float]:
        out = []
        for text in texts:
            t0 = time.perf_counter()
            encode([text])
            out.append((time.perf_counter() - t0) * 1000.0)
        return out

    times = await asyncio.to_thread(timed)  # the passes' own percentile, so the share compares like with like
    return {"p50_ms": round(percentile(times, 50), 3), "p95_ms": round(percentile(times, 95), 3)}


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalPlan:
    """What to run."""

    lanes: tuple[str, ...]
    """Lanes of the fused pass; each also runs alone when ``lane_passes``."""
    route: str = "all"
    """Route of the fused pass: ``all`` (the federation), ``auto`` or a strategy. ``fabric eval`` passes the configured
    default route, what a request that names none receives."""
    federation: bool = False
    """Also run the lanes under route ``all`` (pass ``federation``) when :attr:`route` is another one."""
    fusion: FusionMode | None = None
    mode: Mode = Mode.RESEARCH
    top_k: int = 100
    concurrency: int = 1
    lane_passes: bool = True
    keep_lane_hits: bool = False
    calibrate_every: int = 10
    warm_all: bool = True
    """Run every query once untimed before the timed passes (see :func:`run_plan`)."""


async def _plan_pass(
    engine: SearchEngine,
    dataset: Dataset,
    plan: EvalPlan,
    *,
    name: str,
    lanes: tuple[str, ...],
    keep_lane_hits: bool = False,
    clock: CalibrationClock | None = None,
    on_query: Callable[[], None] | None = None,
    route: str = "all",
) -> PassResult:
    """One pass with the plan's fusion, mode, top-k and concurrency under ``route``."""
    return await run_pass(
        engine,
        dataset,
        name=name,
        lanes=lanes,
        fusion=plan.fusion,
        mode=plan.mode,
        top_k=plan.top_k,
        concurrency=plan.concurrency,
        keep_lane_hits=keep_lane_hits,
        clock=clock,
        on_query=on_query,
        route=route,
    )


def _pass_names(plan: EvalPlan) -> list[tuple[str, tuple[str, ...], str]]:
    """(pass name, lanes, route) of each timed pass: fused under the plan's route, the federation when asked and
    different, then each lane alone."""
    names = [(FUSED, plan.lanes, plan.route)]
    if plan.federation and plan.route != "all":
        names.append((FEDERATION, plan.lanes, "all"))
    if plan.lane_passes and len(plan.lanes) > 1:
        names += [(lane, (lane,), "all") for lane in plan.lanes]
    return names


async def run_plan(
    engine: SearchEngine,
    dataset: Dataset,
    plan: EvalPlan,
    *,
    on_pass: Callable[[str, int], Callable[[], None]] | None = None,
) -> tuple[dict[str, PassResult], CalibrationClock]:
    """Warm the engine up, then run the fused pass and each lane alone, sampling calibration throughout.

    Args:
        engine: an opened engine.
        dataset: judged queries.
        plan: lanes, fusion mode, budgets mode, concurrency.
        on_pass: called with (pass name, query count) before each pass; returns the per-query callback.
    """
    clock = CalibrationClock(every=plan.calibrate_every)
    if dataset.queries:
        # Untimed warm-up: loads models and opens stores (pages, snapshots, caches of the lanes), so every timed
        # pass measures the same warm path. Query vectors are not cached in an eval (eval_settings): each timed
        # query is encoded inside its timed call, whatever ran before it.
        warm = dataset if plan.warm_all else dataset.limited(1)
        callback = on_pass("warmup", len(warm.queries)) if on_pass else None
        await _plan_pass(engine, warm, plan, name="warmup", lanes=plan.lanes, on_query=callback, route=plan.route)
    clock.sample(3)
    passes: dict[str, PassResult] = {}
    for name, lanes, route in _pass_names(plan):
        callback = on_pass(name, len(dataset.queries)) if on_pass else None
        passes[name] = await _plan_pass(
            engine,
            dataset,
            plan,
            name=name,
            lanes=lanes,
            keep_lane_hits=plan.keep_lane_hits and name == FUSED,
            clock=clock,
            on_query=callback,
            route=route,
        )
    if plan.lane_passes and len(plan.lanes) == 1:
        only = plan.lanes[0]
        passes[only] = dataclasses.replace(passes[FUSED], name=only)
    clock.sample(3)
    return passes, clock


async def timed_fused_pass(
    engine: SearchEngine,
    dataset: Dataset,
    plan: EvalPlan,
    *,
    name: str,
    on_query: Callable[[], None] | None = None,
) -> PassResult:
    """Time the fused pass once more with its own calibration clock (samples before, during and after).

    Used for the latency gate's extra attempts (:mod:`fabric.eval.latency`); the result is named ``fused``.
    """
    clock = CalibrationClock(every=plan.calibrate_every)
    clock.sample(3)
    result = await _plan_pass(
        engine, dataset, plan, name=name, lanes=plan.lanes, clock=clock, on_query=on_query, route=plan.route
    )
    clock.sample(3)
    return dataclasses.replace(result, name=FUSED, calibration_ms=tuple(clock.samples))


def artifact_config(settings: Settings, plan: EvalPlan) -> dict[str, Any]:
    """The ``config`` section of the artifact."""
    fusion = plan.fusion or settings.fusion.mode
    return {
        "fusion_mode": fusion.value,
        "rrf_k": settings.fusion.rrf_k,
        "combmnz": settings.fusion.combmnz,
        "factor_scaling": settings.fusion.factor_scaling,
        "weights": {lane: settings.lanes[lane].weight for lane in plan.lanes},
        "confidence": {kind.value: dataclasses.asdict(cal) for kind, cal in active_confidence(settings).items()},
        "lanes": list(plan.lanes),
        "route": plan.route,
        "mode": plan.mode.value,
        "top_k": plan.top_k,
        "lane_top_k": settings.engine.lane_top_k,
        "concurrency": plan.concurrency,
        "provider_suspension": "off (eval)",
        "embeddings": f"{settings.embeddings.backend}:{settings.embeddings.model}"
        + (f"@{settings.embeddings.runtime}" if settings.embeddings.backend == "minilm" else ""),
        # the staged-retrieval policy's gate values and budgets, and which of the run's lanes are stage-2 fill
        "stages": {
            **dataclasses.asdict(settings.fusion.stages),
            "stage2_lanes": [lane for lane in plan.lanes if settings.lanes[lane].stage == 2],
        },
    }


def ingest_settings(settings: Settings, lanes: Sequence[str] = ()) -> Settings:
    """Settings for building an eval home: every offline lane enabled (plus ``lanes``), so one home serves all."""
    wanted = set(default_lanes(settings)) | set(lanes)
    wanted |= {lc.name for lc in settings.lanes.values() if lc.kind in OFFLINE_KINDS and lc.enabled}
    return dataclasses.replace(
        settings,
        lanes={n: dataclasses.replace(c, enabled=n in wanted) for n, c in settings.lanes.items()},
    )


async def ingest_dataset(settings: Settings, dataset: Dataset) -> None:
    """Ingest the dataset's corpus into ``settings.home`` the way ``fabric ingest`` does (same stores, embedder)."""
    from fabric.ingest.run import run_ingest

    settings.home.mkdir(parents=True, exist_ok=True)
    report = await run_ingest(settings, dataset.corpus, dataset.corpus_format)
    log.info("eval_home_ingested", **{k: v for k, v in report.to_dict().items() if isinstance(v, int | str)})
