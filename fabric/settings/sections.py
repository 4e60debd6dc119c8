"""The typed sections of the settings: one frozen dataclass per ``fabric/config/*.toml`` table, defaults in the fields.

:mod:`fabric.settings` reads and validates them into :class:`~fabric.settings.Settings` and re-exports every name
here (import them from either module). Annotations are resolved at run time by
:func:`fabric.settings.readers.build`, so the types they name are imported here, not only for type checking.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fabric.core.models import FusionMode, LaneKind, Mode, Trust

__all__ = [
    "METRIC_KEYS",
    "AdditiveBoosts",
    "AuthorityEntry",
    "DedupConfig",
    "DedupWeights",
    "EmbeddingsConfig",
    "EngineConfig",
    "FactorWeights",
    "FusionConfig",
    "IngestConfig",
    "LaneConfidence",
    "LaneConfig",
    "ModeConfig",
    "PenaltyConfig",
    "PreflightConfig",
    "SlowCookConfig",
    "StageConfig",
    "TrustConfig",
    "TrustRule",
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
class DedupWeights:
    """Weight of each deduplication criterion (the fusion policy's criteria table: domain + title 70 %, content hash
    20 %, URL 10 %, and no near-duplicate criterion). As the policy's own deduplicator reads them, any criterion with
    a weight above 0 merges on its own; a weight of 0 turns the criterion off."""

    title: float = 1.0
    content: float = 1.0
    url: float = 1.0
    near: float = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class DedupConfig:
    """Deduplication thresholds (the fusion policy)."""

    title_jaccard: float = 0.8
    url_similarity: float = 0.9
    near_duplicate: float = 0.9
    weights: DedupWeights = field(default_factory=DedupWeights)
    """Criteria in use (``[fusion.dedup.weights]``): every one by default."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AdditiveBoosts:
    """The fusion policy's additive boosts (its ``ReciprocalRankFusion``): added to every lane occurrence's RRF term,
    into the fused score (:mod:`fusion.literal`). 0 turns a boost off, the default."""

    domain: float = 0.0
    """``domain / (n + 1)``, ``n`` the candidates of the item's domain fused before it (the policy: 0.1)."""
    recency: float = 0.0
    """``recency × step(age)`` (the policy: 0.05)."""
    recency_steps: tuple[tuple[float, float], ...] = ((1.0, 1.0), (7.0, 0.5), (30.0, 0.2))
    """(max age in days, step) in increasing age; older or undated items get 0 (the policy: 1, 0.5, 0.2, 0)."""


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
    ranking: str = "factors"
    """How a staged fusion (``append_fill``, or a stage-2 lane among the fused ones) is ordered: ``factors`` (the
    ranking factors, as any fusion) or ``fused`` (the staged-retrieval policy: the fused score alone with its
    deterministic tie-break; ``append_fill`` then keeps stage 1's order as it is)."""
    p95_target_ms: float = 1500.0
    """The acceptance verdict of an eval with stage-2 lanes: fused p95 at most this (the staged-retrieval policy)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LaneConfidence:
    """A lane's weight per query from its own top score, for lanes whose scores have an absolute scale (cosine).

    ``factor = clip(1 + slope · (top score − reference), min, max)`` multiplies the lane's weight, as the provider
    penalty does (:mod:`fusion.confidence`). The scale is the embedding model's: the calibration applies only while
    the engine's ``[embeddings] model`` is ``model`` (another model: factor 1). ``slope = 0`` turns it off.
    """

    model: str = ""
    """The embedding model the calibration was measured with; empty: any model."""
    reference: float = 0.0
    """The top score at which the factor is 1."""
    slope: float = 0.0
    """Change of the factor per unit of top score (0: off)."""
    min: float = 1.0
    """Lowest factor (> 0 and <= 1)."""
    max: float = 1.0
    """Highest factor (>= 1)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FusionConfig:
    """How lanes are fused and ranked."""

    mode: FusionMode = FusionMode.RRF
    rrf_k: int = 60
    combmnz: bool = False
    """Score modes: multiply the fused score by the number of lanes that returned the item (CombMNZ)."""
    factor_scaling: str = "normalised"
    """``normalised``: every factor on [0, 1] and a weighted mean of the informative ones (:mod:`fusion.rank`);
    ``literal``: the fusion policy's weighted sum with the raw RRF (:mod:`fusion.literal`)."""
    boosts: AdditiveBoosts = field(default_factory=AdditiveBoosts)
    factors: FactorWeights = field(default_factory=FactorWeights)
    dedup: DedupConfig = field(default_factory=DedupConfig)
    stages: StageConfig = field(default_factory=StageConfig)
    confidence: Mapping[str, LaneConfidence] = field(default_factory=dict)
    """Lane kind → its confidence calibration (``[fusion.confidence]``); a kind not listed keeps its weight."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthorityEntry:
    """Authority of one domain."""

    score: float = 0.5
    keyless: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineConfig:
    """Request limits."""

    max_query_bytes: int = 16384
    max_top_k: int = 200
    lane_top_k: int = 50
    default_mode: Mode = Mode.TECHNICAL
    unknown_mode: Mode | None = None
    """A request's mode outside the vocabulary, or one without budgets, runs as this mode (the fusion policy's
    ``calculate_lane_budgets``: ``simple``); unset: an unknown mode is refused and a mode without budgets gets
    the defaults of :class:`ModeConfig`."""
    all_time_years: int = 0
    """``time_range = "all_time"`` binds the last this many years (the fusion policy's ``get_date_from``: 10); 0: no
    date bound."""
    source_binding: str = "filter"
    """What ``sources`` keeps: ``filter`` (the policy's domains, imported corpora as academic, news feeds as news)
    or ``sites`` (only the ``site:`` domains of the policy's query modifier, on every lane)."""


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
class TrustRule:
    """One rule of ``[ingest.trust] rules``: files whose relative path matches ``glob`` get ``trust``."""

    glob: str
    """A path glob (:mod:`fabric.core.globs`): relative to the ingested folder, ``**`` spans folders."""
    trust: Trust = Trust.TRUSTED


@dataclass(frozen=True, slots=True, kw_only=True)
class TrustConfig:
    """``[ingest.trust]``: the trust of each file a Markdown folder ingest reads (:mod:`fabric.ingest.selection`)."""

    rules: tuple[TrustRule, ...] = (
        TrustRule(glob="**/DECISION*.md"),
        TrustRule(glob="**/decisions/**"),
        TrustRule(glob="**/roadmap*.md"),
        TrustRule(glob="**/roadmap/**"),
        TrustRule(glob="**/spec*/**"),
        TrustRule(glob="**/design/**"),
    )
    """Ordered rules, the first match decides (decision records, operator roadmaps and specs are trusted)."""
    default: Trust = Trust.UNTRUSTED
    """The trust of a file no rule matches (repository text is not trusted automatically)."""
    front_matter: bool = True
    """Whether a file's front matter ``trust:`` / ``source_kind:`` overrides the rules (honoured for the operator and
    admin keys only: the roles that may set trust)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestConfig:
    """Ingestion: what a folder ingest reads and trusts, and ``POST /v1/ingest`` of ``fabric serve``."""

    include: tuple[str, ...] = ()
    """The allowlist of folder walks: path globs a file must match to be read (empty: every file)."""
    exclude: tuple[str, ...] = ()
    """Path globs of files never read, even when included (``fabric ingest --include/--exclude`` replace them)."""
    trust: TrustConfig = field(default_factory=TrustConfig)
    """The trust rules (``[ingest.trust]``)."""

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
