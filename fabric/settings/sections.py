"""The typed sections of the settings: one frozen dataclass per ``fabric/config/*.toml`` table, defaults in the fields.

:mod:`fabric.settings` reads and validates them into :class:`~fabric.settings.Settings` and re-exports every name
here (import them from either module). Annotations are resolved at run time by
:func:`fabric.settings.readers.build`, so the types they name are imported here, not only for type checking.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fabric.core.models import FusionMode, LaneKind, Mode

__all__ = [
    "METRIC_KEYS",
    "AuthorityEntry",
    "DedupConfig",
    "EmbeddingsConfig",
    "EngineConfig",
    "FactorWeights",
    "FusionConfig",
    "IngestConfig",
    "LaneConfig",
    "ModeConfig",
    "PenaltyConfig",
    "PreflightConfig",
    "SlowCookConfig",
    "StageConfig",
]


METRIC_KEYS: tuple[str, ...] = (
    "ndcg_at_10",
    "mrr_at_10",
    "recall_at_10",
    "recall_at_20",
    "recall_at_100",
    "precision_at_10",
    "hit_at_1",
    "hit_at_5",
)
"""Quality metrics of the artifact, in report order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModeConfig:
    """Budgets of one mode."""

    total_budget_ms: float = 7000.0
    """The query's overall deadline."""
    preflight_ms: float = 500.0
    """Pre-flight budget."""
    lanes: Mapping[str, float] = field(default_factory=dict)
    """Lane name → budget in ms."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LaneConfig:
    """One lane of ``lanes.toml``."""

    name: str
    """Lane name (the table key)."""
    kind: LaneKind
    """Lane kind."""
    backend: str
    """Registry name of the adapter (``sqlite_fts``, ``qdrant``, ``meilisearch``, ...)."""
    enabled: bool = True
    """Whether the lane is planned by default."""
    weight: float = 1.0
    """Fusion weight (multiplied by the provider penalty factor)."""
    fallback: str | None = None
    """Lane (or ``web_cache``) run in this lane's remaining budget when it fails."""
    fallback_reserve_ms: float = 0.0
    """Part of the lane's budget kept for its fallback: the lane's own call is cut this much earlier, so that a
    lane that times out still leaves its fallback time (a cache answers in well under a millisecond). At most a
    quarter of the lane's budget is reserved."""
    stage: int = 1
    """1 for must-first lanes, 2 for fill lanes (the staged-retrieval policy)."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Backend options, validated by the adapter."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FactorWeights:
    """Ranking factor weights (the fusion policy: 50/20/15/10/5)."""

    rrf: float = 0.50
    domain_diversity: float = 0.20
    recency: float = 0.15
    authority: float = 0.10
    quality: float = 0.05


@dataclass(frozen=True, slots=True, kw_only=True)
class DedupConfig:
    """Deduplication thresholds (the fusion policy)."""

    title_jaccard: float = 0.8
    url_similarity: float = 0.9
    near_duplicate: float = 0.9


@dataclass(frozen=True, slots=True, kw_only=True)
class StageConfig:
    """Staged retrieval (the staged-retrieval policy): the gate, the cap and the per-stage candidate budgets."""

    min_must_count: int = 3
    """Stage 2 is triggered when stage 1 yields fewer fused items than this (3 for top_k 10)."""
    stage2_cap_ms: float = 600.0
    """Stage 2 is skipped when its provider's observed latency exceeds this; else cut at it."""
    stage1_top_n: int = 20
    """N1: hits asked of each stage-1 lane when stage-2 lanes are planned (else ``engine.lane_top_k``)."""
    stage2_top_n: int = 20
    """N2: hits asked of each stage-2 lane."""
    max_appended: int = 10
    """At most this many stage-2-only items reach the answer (the staged-retrieval policy: practically fill-to-k)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FusionConfig:
    """How lanes are fused and ranked."""

    mode: FusionMode = FusionMode.RRF
    rrf_k: int = 60
    combmnz: bool = False
    """Score modes: multiply the fused score by the number of lanes that returned the item (CombMNZ)."""
    factors: FactorWeights = field(default_factory=FactorWeights)
    dedup: DedupConfig = field(default_factory=DedupConfig)
    stages: StageConfig = field(default_factory=StageConfig)


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthorityEntry:
    """Authority of one domain."""

    score: float = 0.5
    keyless: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineConfig:
    """Request limits."""

    max_query_bytes: int = 4096
    max_top_k: int = 200
    lane_top_k: int = 50
    default_mode: Mode = Mode.TECHNICAL


@dataclass(frozen=True, slots=True, kw_only=True)
class PreflightConfig:
    """Pre-flight lane settings."""

    enabled: bool = True
    budget_ms: float = 500.0
    max_inflight: int = 64
    max_loop_lag_ms: float = 50.0
    min_lane_budget_share: float = 0.25
    chat_url: str = ""
    chat_model: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class PenaltyConfig:
    """Provider health and suspension policy."""

    window: int = 20
    failure_rate_suspend: float = 0.5
    min_samples: int = 4
    base_suspend_s: float = 5.0
    max_suspend_s: float = 300.0
    retry_budget_ratio: float = 0.1


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbeddingsConfig:
    """Which embedder ingestion and the vector lane share."""

    backend: str = "minilm"
    model: str = "all-MiniLM-L6-v2"
    runtime: str = "openvino"
    """How ``backend = "minilm"`` encodes documents: ``openvino`` (the default: OpenVINO, bf16 on CPUs with AMX or
    AVX-512 BF16, else fp32; 2.3-2.9x fp32 ONNX's documents per second here, nDCG@10 within 0.0001) | ``onnx`` (ONNX
    Runtime, fp32) | ``onnx-int8`` (int8 weights: faster, but CISI nDCG@10 -0.0054, past the 0.002 gate) |
    ``torch`` (sentence-transformers) (:mod:`fabric.embed.minilm`)."""
    query_threads: int = 1
    """Threads for a query's (or a micro-batch's) encoding: 1 leaves a core to the lanes."""
    query_weights: str = "int8-matmul"
    """What encodes queries (ONNX runtimes): ``same`` (the documents' model) | ``int8-matmul`` (the default: int8
    weights in the MatMuls, 1.8x faster; nDCG@10 SciFact +0.0004, CISI -0.0016) | ``int8`` (CISI -0.0033: past
    the 0.002 rule) (:data:`fabric.embed.minilm.QUERY_WEIGHTS`, docs/engine.md); documents always get ``runtime``'s."""
    batch_threads: int = 0
    """Threads for ingestion's large batches (0: every core)."""
    cache_queries: bool = True
    """Keep the last 4,096 query vectors in memory (never on disk), so a repeated query skips the model.
    ``fabric eval`` turns it off: every query it times is encoded inside the timed call, as a user's new query is
   ."""
    url: str = ""
    api_key: str = ""
    batch_size: int = 64
    private_sources: tuple[str, ...] = ()
    """Glob patterns of sources whose text never goes to a remote embedder (:mod:`fabric.ingest.privacy`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestConfig:
    """Ingestion over HTTP (``POST /v1/ingest`` of ``fabric serve``)."""

    sync_max_entries: int = 100
    """Entry requests up to this size run inline (200 with the report) when no task is queued or running;
    larger ones, ``"async": true`` and ``path`` requests answer 202 with a task handle. 0: always a task."""
    max_entries: int = 100_000
    """Most entries one request may carry."""
    max_body_bytes: int = 32 * 1024 * 1024
    """Body cap of ``POST /v1/ingest`` only (``POST /v1/search`` keeps its own 64 KiB)."""
    allowed_root: str = ""
    """Folder that ``{"path": ...}`` requests may read under (symlinks resolved); empty: path requests refused."""
    max_queued: int = 16
    """Tasks waiting behind the running one; beyond this a submission answers 503."""
    history: int = 100
    """Finished task records kept in ``<home>/tasks.sqlite`` (oldest dropped first), across restarts."""
    replica_poll_s: float = 0.5
    """Replicas (``FABRIC_STATE_URL``): how often an idle replica asks whether its tenants have tasks to run (a
    submission to it wakes it at once); also how soon a dead replica's task is taken over."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SlowCookConfig:
    """The slow-cook job of the docs-memory policy (``fabric slowcook``, :mod:`fabric.eval.slowcook`)."""

    queries: str = ""
    """The fixed query set (a dataset folder, :mod:`fabric.eval.dataset`, relative to the working directory); empty:
    the one shipped with the package over the demo corpus."""
    split: str = "test"
    """Its qrels split."""
    receipt: str = ""
    """Where the receipt is kept (and the previous one read); empty: ``<home>/slowcook/receipt.json``."""
    top_failures: int = 5
    """Failure cases the receipt lists (queries whose target is not first), worst first."""
    tolerance: Mapping[str, float] = field(
        default_factory=lambda: {"ndcg_at_10": 0.02, "mrr_at_10": 0.02, "hit_at_1": 0.05, "hit_at_5": 0.0}
    )
    """Metric → the largest drop against the previous receipt that is not a regression (absolute)."""
