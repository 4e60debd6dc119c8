"""The only reader of settings: ``config/*.toml`` → typed, frozen dataclasses, once, at start-up.

Order of precedence (later wins):

1. the project's ``config/*.toml`` (or ``config_dir``);
2. a profile overlay ``config/<profile>.toml`` when ``FABRIC_PROFILE`` (or ``profile=``) is set, e.g. ``compose``;
3. a user file named by ``FABRIC_CONFIG`` (or ``user_file=``), same sections as the project files;
4. environment variables: ``FABRIC_HOME``, the service URLs of :data:`ENV_URLS`, and the generic
   ``FABRIC__<section>__<key>[__<key>...]=<TOML value>`` (e.g. ``FABRIC__fusion__rrf_k=40``).

Every file carries ``schema = 1``. A bad setting raises :class:`~fabric.errors.ConfigError` naming the
file and the dotted key (``lanes.vector.weight``). Defaults live in the dataclass fields below.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import os
import tomllib
import types
import typing
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabric.errors import ConfigError
from fabric.models import FusionMode, LaneKind, Mode
from fabric.router.config import RouterConfig, validate_router_config

__all__ = [
    "CONFIG_FILES",
    "ENV_URLS",
    "SCHEMA",
    "SELF_HOSTED_BACKENDS",
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
    "Settings",
    "StageConfig",
    "default_config_dir",
    "load_settings",
]

SCHEMA = 1
CONFIG_FILES = ("modes.toml", "lanes.toml", "fusion.toml", "authority.toml", "engine.toml", "router.toml")



class _EnvUrls(Mapping[str, tuple[str, str]]):
    """Environment variable → (backend, option), derived from the backends' declarations on first use."""

    @staticmethod
    @functools.cache
    def _table() -> dict[str, tuple[str, str]]:
        from lanes.registry import env_options  # deferred: settings do not import the lanes until asked

        return env_options()

    def __getitem__(self, key: str) -> tuple[str, str]:
        return self._table()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


class _SelfHosted(AbstractSet[str]):
    """Names of the self-hosted backends, derived from the backends' declarations on first use."""

    @staticmethod
    @functools.cache
    def _names() -> frozenset[str]:
        from lanes.registry import self_hosted

        return self_hosted()

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._names()))

    def __len__(self) -> int:
        return len(self._names())


ENV_URLS: Mapping[str, tuple[str, str]] = _EnvUrls()
"""Environment variable → (backend, option) applied to every lane using that backend (service URLs and secrets,
as each backend declares them: :attr:`lanes.base.Backend.env`)."""

SELF_HOSTED_BACKENDS: AbstractSet[str] = _SelfHosted()
"""Backends that run next to the fabric (the compose stack), whose hosts may resolve to private addresses
(:attr:`lanes.base.Backend.self_hosted`)."""


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
    """1 for must-first lanes, 2 for fill lanes (seed 000)."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Backend options, validated by the adapter."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FactorWeights:
    """Ranking factor weights (seed 003: 50/20/15/10/5)."""

    rrf: float = 0.50
    domain_diversity: float = 0.20
    recency: float = 0.15
    authority: float = 0.10
    quality: float = 0.05


@dataclass(frozen=True, slots=True, kw_only=True)
class DedupConfig:
    """Deduplication thresholds (seed 003)."""

    title_jaccard: float = 0.8
    url_similarity: float = 0.9
    near_duplicate: float = 0.9


@dataclass(frozen=True, slots=True, kw_only=True)
class StageConfig:
    """Staged retrieval (seed 000)."""

    min_must_count: int = 3
    stage2_cap_ms: float = 600.0


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
    url: str = ""
    api_key: str = ""
    batch_size: int = 64


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
    """Finished task records kept in memory (oldest dropped first); records live only as long as the process."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Everything the engine reads from configuration."""

    home: Path = Path(".fabric")
    """Root of the embedded stores (``FABRIC_HOME``)."""
    cache_dir: Path = Path(".cache/fabric")
    """Content-addressed caches (embeddings, built eval indexes) shared across homes (``FABRIC_CACHE_DIR``)."""
    modes: Mapping[Mode, ModeConfig] = field(default_factory=dict)
    lanes: Mapping[str, LaneConfig] = field(default_factory=dict)
    fusion: FusionConfig = field(default_factory=FusionConfig)
    authority: Mapping[str, AuthorityEntry] = field(default_factory=dict)
    authority_default: float = 0.5
    engine: EngineConfig = field(default_factory=EngineConfig)
    preflight: PreflightConfig = field(default_factory=PreflightConfig)
    penalties: PenaltyConfig = field(default_factory=PenaltyConfig)
    embeddings: EmbeddingsConfig = field(default_factory=EmbeddingsConfig)
    ingest: IngestConfig = field(default_factory=IngestConfig)
    router: RouterConfig = field(default_factory=RouterConfig)
    """The query router of seed 004 (``config/router.toml``, :mod:`fabric.router.config`)."""
    sources: tuple[str, ...] = ()
    """Files the settings were read from, in order."""

    def mode(self, mode: Mode) -> ModeConfig:
        """The budgets of ``mode``."""
        return self.modes.get(mode, ModeConfig())

    def enabled_lanes(self) -> list[LaneConfig]:
        """Enabled lanes in file order."""
        return [lane for lane in self.lanes.values() if lane.enabled]


def default_config_dir() -> Path:
    """The project's ``config/`` folder (next to the packages)."""
    return Path(__file__).resolve().parent.parent / "config"


# --------------------------------------------------------------------------------------------- loading


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError("file not found", source=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", source=str(path)) from None
    schema = data.pop("schema", SCHEMA)
    if schema != SCHEMA:
        raise ConfigError(f"unsupported schema {schema!r} (expected {SCHEMA})", source=str(path), key="schema")
    return data


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _coerce(tp: Any, value: Any, src: str, key: str) -> Any:
    """Coerce a TOML value to the annotated type ``tp`` or raise ConfigError."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(inner[0], value, src, key)
    if tp is Any:
        return value
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp.from_str(str(value)) if hasattr(tp, "from_str") else tp(value)
        except ValueError as exc:
            raise ConfigError(str(exc), source=src, key=key) from None
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"expected true/false, got {value!r}", source=src, key=key)
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"expected an integer, got {value!r}", source=src, key=key)
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"expected a number, got {value!r}", source=src, key=key)
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"expected a string, got {value!r}", source=src, key=key)
        return value
    if tp is Path:
        return Path(str(value))
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"expected a list, got {value!r}", source=src, key=key)
        return tuple(_coerce(args[0], v, src, f"{key}[{i}]") for i, v in enumerate(value))
    if origin in (Mapping, dict) or tp in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(f"expected a table, got {value!r}", source=src, key=key)
        vt = args[1] if len(args) == 2 else Any
        return {str(k): _coerce(vt, v, src, f"{key}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _build(tp, value, src, key)
    return value


def _build(cls: type[Any], data: Any, src: str, key: str, **fixed: Any) -> Any:
    """Build dataclass ``cls`` from a TOML table, rejecting unknown keys."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"expected a table, got {data!r}", source=src, key=key)
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(unknown)}; valid: {', '.join(sorted(names - set(fixed)))}",
            source=src,
            key=key,
        )
    kwargs = dict(fixed)
    for name, value in data.items():
        kwargs[name] = _coerce(hints[name], value, src, f"{key}.{name}" if key else name)
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ConfigError(str(exc), source=src, key=key) from None


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    """``FABRIC__a__b=value`` → ``{"a": {"b": value}}`` with TOML literal parsing (strings fall back)."""
    out: dict[str, Any] = {}
    for name, raw in env.items():
        if not name.startswith("FABRIC__"):
            continue
        path = [p for p in name[len("FABRIC__") :].split("__") if p]
        if not path:
            continue
        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return out


def _positive(value: float, src: str, key: str) -> None:
    if value <= 0:
        raise ConfigError(f"must be > 0, got {value!r}", source=src, key=key)


def load_settings(
    config_dir: Path | None = None,
    *,
    user_file: Path | None = None,
    profile: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Load, merge and validate every settings source into :class:`Settings`.

    Raises:
        ConfigError: naming the file and key path of the first bad setting.
    """
    env = os.environ if env is None else env
    cdir = config_dir or default_config_dir()
    merged: dict[str, Any] = {}
    sources: list[str] = []
    for name in CONFIG_FILES:
        path = cdir / name
        if path.exists():
            merged = _merge(merged, _read_toml(path))
            sources.append(str(path))
    profile = profile if profile is not None else env.get("FABRIC_PROFILE") or None
    if profile:
        path = cdir / f"{profile}.toml"
        if not path.exists():
            raise ConfigError(f"profile {profile!r} not found", source=str(path), key="FABRIC_PROFILE")
        merged = _merge(merged, _read_toml(path))
        sources.append(str(path))
    ufile = user_file or (Path(env["FABRIC_CONFIG"]) if env.get("FABRIC_CONFIG") else None)
    if ufile is not None:
        merged = _merge(merged, _read_toml(ufile))
        sources.append(str(ufile))
    overrides = _env_overrides(env)
    if overrides:
        merged = _merge(merged, overrides)
        sources.append("env")
    src = " + ".join(Path(s).name if s != "env" else s for s in sources) or "defaults"
    return _validate(merged, src, env, tuple(sources))


def _validate(data: dict[str, Any], src: str, env: Mapping[str, str], sources: tuple[str, ...]) -> Settings:
    known = {
        "modes",
        "lanes",
        "fusion",
        "authority",
        "default",
        "domains",
        "engine",
        "preflight",
        "penalties",
        "embeddings",
        "ingest",
        "router",
        "home",
    }
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"unknown section(s) {', '.join(unknown)}", source=src)

    modes: dict[Mode, ModeConfig] = {}
    for mname, mdata in data.get("modes", {}).items():
        try:
            mode = Mode.from_str(mname)
        except ValueError as exc:
            raise ConfigError(str(exc), source=src, key=f"modes.{mname}") from None
        mc: ModeConfig = _build(ModeConfig, mdata, src, f"modes.{mname}")
        _positive(mc.total_budget_ms, src, f"modes.{mname}.total_budget_ms")
        for lane, budget in mc.lanes.items():
            _positive(budget, src, f"modes.{mname}.lanes.{lane}")
        modes[mode] = mc

    lanes: dict[str, LaneConfig] = {}
    for lname, ldata in data.get("lanes", {}).items():
        if not isinstance(ldata, Mapping):
            raise ConfigError("expected a table", source=src, key=f"lanes.{lname}")
        ldata = dict(ldata)
        for missing in ("kind", "backend"):
            if missing not in ldata:
                raise ConfigError("required key missing", source=src, key=f"lanes.{lname}.{missing}")
        opts = dict(ldata.get("options", {}))
        for var, (backend, option) in ENV_URLS.items():
            if env.get(var) and ldata.get("backend") == backend:
                opts[option] = env[var]
        ldata["options"] = opts
        lc: LaneConfig = _build(LaneConfig, ldata, src, f"lanes.{lname}", name=lname)
        if lc.weight < 0:
            raise ConfigError(f"must be >= 0, got {lc.weight}", source=src, key=f"lanes.{lname}.weight")
        if lc.fallback_reserve_ms < 0:
            raise ConfigError(
                f"must be >= 0, got {lc.fallback_reserve_ms}", source=src, key=f"lanes.{lname}.fallback_reserve_ms"
            )
        if lc.stage not in (1, 2):
            raise ConfigError(f"must be 1 or 2, got {lc.stage}", source=src, key=f"lanes.{lname}.stage")
        lanes[lname] = lc
    for lc in lanes.values():
        if lc.fallback and lc.fallback not in lanes and lc.fallback != "web_cache":
            raise ConfigError(
                f"unknown fallback lane {lc.fallback!r}; valid: {', '.join(sorted(lanes))}, web_cache",
                source=src,
                key=f"lanes.{lc.name}.fallback",
            )

    fusion: FusionConfig = _build(FusionConfig, data.get("fusion", {}), src, "fusion")
    _positive(fusion.rrf_k, src, "fusion.rrf_k")

    authority: dict[str, AuthorityEntry] = {}
    for domain, entry in data.get("domains", {}).items():
        if isinstance(entry, int | float) and not isinstance(entry, bool):
            entry = {"score": entry}
        ae: AuthorityEntry = _build(AuthorityEntry, entry, src, f"domains.{domain}")
        if not 0.0 <= ae.score <= 1.0:
            raise ConfigError(f"must be in [0, 1], got {ae.score}", source=src, key=f"domains.{domain}.score")
        authority[domain.lower()] = ae
    authority_default = _coerce(float, data.get("default", 0.5), src, "default")

    ingest: IngestConfig = _build(IngestConfig, data.get("ingest", {}), src, "ingest")
    for name in ("max_entries", "max_body_bytes", "max_queued", "history"):
        _positive(getattr(ingest, name), src, f"ingest.{name}")
    if ingest.sync_max_entries < 0:
        raise ConfigError(f"must be >= 0, got {ingest.sync_max_entries}", source=src, key="ingest.sync_max_entries")

    home = Path(env.get("FABRIC_HOME") or data.get("home") or ".fabric")
    cache_dir = Path(env.get("FABRIC_CACHE_DIR") or data.get("cache_dir") or ".cache/fabric")
    return Settings(
        home=home,
        cache_dir=cache_dir,
        modes=modes,
        lanes=lanes,
        fusion=fusion,
        authority=authority,
        authority_default=authority_default,
        engine=_build(EngineConfig, data.get("engine", {}), src, "engine"),
        preflight=_build(PreflightConfig, data.get("preflight", {}), src, "preflight"),
        penalties=_build(PenaltyConfig, data.get("penalties", {}), src, "penalties"),
        embeddings=_build(EmbeddingsConfig, data.get("embeddings", {}), src, "embeddings"),
        ingest=ingest,
        router=validate_router_config(
            _build(RouterConfig, data.get("router", {}), src, "router"), lanes if "router" in data else {}, src
        ),
        sources=sources,
    )
