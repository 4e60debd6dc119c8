"""Settings (this floor imports only :mod:`fabric.core`; the backends' environment variables are read from
:mod:`lanes.registry` lazily, on first use).

The only reader of settings: TOML → typed, frozen dataclasses, once, at start-up.

Order of precedence (later wins):

1. the built-in defaults, ``fabric/config/*.toml`` (package data; or ``config_dir``);
2. a profile overlay ``fabric/config/<profile>.toml`` when ``FABRIC_PROFILE`` (or ``profile=``, ``--profile``) is
   set, e.g. ``compose``;
3. the user's settings file in the platform's config folder (:func:`~fabric.settings.paths.user_config_file`,
   ``~/.config/retrieval-fabric/config.toml`` on Linux), when it exists;
4. a settings file named by ``FABRIC_CONFIG`` (or ``user_file=``, ``--config``), same sections as the built-in ones;
5. environment variables: ``FABRIC_HOME``, ``FABRIC_CACHE_DIR``, ``FABRIC_STATE_URL`` (environment only: it may
   hold a password), the service URLs of :data:`ENV_URLS`, and the generic
   ``FABRIC__<section>__<key>[__<key>...]=<TOML value>`` (e.g. ``FABRIC__fusion__rrf_k=40``).

The home and the cache default to the platform's user data and cache folders, never the working directory.
``fabric config show`` prints the effective settings and the layer each came from (:func:`explain_settings`).

Every file carries ``schema = 1``. A bad setting raises :class:`~fabric.core.errors.ConfigError` naming the
file and the dotted key (``lanes.vector.weight``). Defaults live in the dataclass fields of
:mod:`fabric.settings.sections` (one per section, re-exported here) and :class:`Settings`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabric.core.errors import ConfigError
from fabric.core.globs import PathGlob
from fabric.core.models import Mode
from fabric.settings.checks import read_engine, read_fusion
from fabric.settings.paths import default_cache_dir, default_config_dir, default_home, user_config_file
from fabric.settings.readers import SCHEMA, build, coerce, env_overrides, merge, positive, read_toml
from fabric.settings.router import RouterConfig, validate_router_config
from fabric.settings.sections import (
    METRIC_KEYS,
    AdditiveBoosts,
    AuthorityEntry,
    DedupConfig,
    DedupWeights,
    EmbeddingsConfig,
    EngineConfig,
    FactorWeights,
    FusionConfig,
    IngestConfig,
    LaneConfidence,
    LaneConfig,
    ModeConfig,
    PenaltyConfig,
    PreflightConfig,
    SlowCookConfig,
    StageConfig,
    TrustConfig,
    TrustRule,
)

__all__ = [
    "CONFIG_FILES",
    "ENV_URLS",
    "METRIC_KEYS",
    "SCHEMA",
    "SELF_HOSTED_BACKENDS",
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
    "Settings",
    "SlowCookConfig",
    "StageConfig",
    "TrustConfig",
    "TrustRule",
    "default_config_dir",
    "load_settings",
    "setting_layers",
]

CONFIG_FILES = (
    "modes.toml", "lanes.toml", "fusion.toml", "authority.toml", "engine.toml", "router.toml", "slowcook.toml",
)  # fmt: skip


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
class Settings:
    """Everything the engine reads from configuration."""

    home: Path = field(default_factory=default_home)
    """Root of the embedded stores (``FABRIC_HOME``)."""
    cache_dir: Path = field(default_factory=default_cache_dir)
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
    """The query router of the router policy (``fabric/config/router.toml``, :mod:`fabric.settings.router`)."""
    slowcook: SlowCookConfig = field(default_factory=SlowCookConfig)
    """The slow-cook job of the docs-memory policy (``fabric/config/slowcook.toml``, ``fabric slowcook``)."""
    sources: tuple[str, ...] = ()
    """Files the settings were read from, in order."""
    state_url: str = ""
    """``FABRIC_STATE_URL``: the PostgreSQL database that replicas of ``fabric serve`` share (tasks, keys, rate
    buckets, cursor secret; :mod:`fabric.serve.state`), or ``sqlite:///<folder>`` for replicas on one host (what
    ``fabric serve --workers`` sets); empty: the embedded SQLite and file backends (one process)."""

    def mode(self, mode: Mode) -> ModeConfig:
        """The budgets of ``mode``; a mode without budgets gets ``engine.unknown_mode``'s when that is set."""
        fallback = self.engine.unknown_mode
        return self.modes.get(mode) or (self.modes.get(fallback) if fallback is not None else None) or ModeConfig()

    def enabled_lanes(self) -> list[LaneConfig]:
        """Enabled lanes in file order."""
        return [lane for lane in self.lanes.values() if lane.enabled]


# --------------------------------------------------------------------------------------------- loading


def load_settings(
    config_dir: Path | None = None,
    *,
    user_file: Path | None = None,
    profile: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Load, merge and validate every settings source into :class:`Settings` (the order: the module docstring).

    Raises:
        ConfigError: naming the file and key path of the first bad setting.
    """
    env = os.environ if env is None else env
    merged: dict[str, Any] = {}
    sources: list[str] = []
    for label, data in setting_layers(config_dir, user_file=user_file, profile=profile, env=env):
        merged = merge(merged, data)
        sources.append(label)
    src = " + ".join(Path(s).name if s != "env" else s for s in sources) or "defaults"
    return _validate(merged, src, env, tuple(sources))


def setting_layers(
    config_dir: Path | None = None,
    *,
    user_file: Path | None = None,
    profile: str | None = None,
    env: Mapping[str, str] | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """Each settings source in order of precedence, lowest first: (where it came from, its data).

    Raises:
        ConfigError: an unreadable file, or a profile that does not exist.
    """
    env = os.environ if env is None else env
    cdir = config_dir or default_config_dir()
    layers = [(str(cdir / name), read_toml(cdir / name)) for name in CONFIG_FILES if (cdir / name).exists()]
    profile = profile if profile is not None else env.get("FABRIC_PROFILE") or None
    if profile:
        path = cdir / f"{profile}.toml"
        if not path.exists():
            valid = ", ".join(sorted(p.stem for p in cdir.glob("*.toml") if p.name not in CONFIG_FILES))
            raise ConfigError(
                f"profile {profile!r} not found (built-in: {valid})", source=str(path), key="FABRIC_PROFILE"
            )
        layers.append((str(path), read_toml(path)))
    own = user_config_file()
    if config_dir is None and own.is_file():
        layers.append((str(own), read_toml(own)))
    ufile = user_file or (Path(env["FABRIC_CONFIG"]) if env.get("FABRIC_CONFIG") else None)
    if ufile is not None:
        layers.append((str(ufile), read_toml(ufile)))
    overrides = env_overrides(env)
    if overrides:
        layers.append(("env", overrides))
    return layers


_SECTIONS = frozenset(
    {"modes", "lanes", "fusion", "authority", "default", "domains", "engine", "preflight", "penalties", "embeddings",
     "ingest", "router", "slowcook", "home", "cache_dir"}
)  # fmt: skip


def _validate(data: dict[str, Any], src: str, env: Mapping[str, str], sources: tuple[str, ...]) -> Settings:
    unknown = sorted(set(data) - _SECTIONS)
    if unknown:
        raise ConfigError(f"unknown section(s) {', '.join(unknown)}", source=src)
    fusion = read_fusion(data.get("fusion", {}), src)
    home = Path(env.get("FABRIC_HOME") or data.get("home") or default_home())
    cache_dir = Path(env.get("FABRIC_CACHE_DIR") or data.get("cache_dir") or default_cache_dir())
    lanes = _read_lanes(data.get("lanes", {}), src, env)
    router: RouterConfig = build(RouterConfig, data.get("router", {}), src, "router")
    return Settings(
        home=home,
        cache_dir=cache_dir,
        modes=_read_modes(data.get("modes", {}), src),
        lanes=lanes,
        fusion=fusion,
        authority=_read_authority(data.get("domains", {}), src),
        authority_default=coerce(float, data.get("default", 0.5), src, "default"),
        engine=read_engine(data.get("engine", {}), src),
        preflight=build(PreflightConfig, data.get("preflight", {}), src, "preflight"),
        penalties=build(PenaltyConfig, data.get("penalties", {}), src, "penalties"),
        embeddings=build(EmbeddingsConfig, data.get("embeddings", {}), src, "embeddings"),
        ingest=_read_ingest(data.get("ingest", {}), src),
        router=validate_router_config(router, lanes if "router" in data else {}, src),
        slowcook=_read_slowcook(data.get("slowcook", {}), src),
        sources=sources,
        state_url=env.get("FABRIC_STATE_URL", "").strip(),
    )


def _read_modes(data: Mapping[str, Any], src: str) -> dict[Mode, ModeConfig]:
    """``[modes.<mode>]``: positive total and per-lane budgets."""
    modes: dict[Mode, ModeConfig] = {}
    for mname, mdata in data.items():
        try:
            mode = Mode.from_str(mname)
        except ValueError as exc:
            raise ConfigError(str(exc), source=src, key=f"modes.{mname}") from None
        mc: ModeConfig = build(ModeConfig, mdata, src, f"modes.{mname}")
        positive(mc.total_budget_ms, src, f"modes.{mname}.total_budget_ms")
        for lane, budget in mc.lanes.items():
            positive(budget, src, f"modes.{mname}.lanes.{lane}")
        modes[mode] = mc
    return modes


def _read_lanes(data: Mapping[str, Any], src: str, env: Mapping[str, str]) -> dict[str, LaneConfig]:
    """``[lanes.<name>]``: kind and backend required, service URLs from the environment, fallbacks that exist."""
    lanes: dict[str, LaneConfig] = {}
    for lname, ldata in data.items():
        lanes[lname] = _read_lane(lname, ldata, src, env)
    for lc in lanes.values():
        if lc.fallback and lc.fallback not in lanes and lc.fallback != "web_cache":
            raise ConfigError(
                f"unknown fallback lane {lc.fallback!r}; valid: {', '.join(sorted(lanes))}, web_cache",
                source=src,
                key=f"lanes.{lc.name}.fallback",
            )
    return lanes


def _read_lane(lname: str, ldata: Any, src: str, env: Mapping[str, str]) -> LaneConfig:
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
    lc: LaneConfig = build(LaneConfig, ldata, src, f"lanes.{lname}", name=lname)
    if lc.weight < 0:
        raise ConfigError(f"must be >= 0, got {lc.weight}", source=src, key=f"lanes.{lname}.weight")
    if lc.fallback_reserve_ms < 0:
        raise ConfigError(
            f"must be >= 0, got {lc.fallback_reserve_ms}", source=src, key=f"lanes.{lname}.fallback_reserve_ms"
        )
    if lc.stage not in (1, 2):
        raise ConfigError(f"must be 1 or 2, got {lc.stage}", source=src, key=f"lanes.{lname}.stage")
    return lc


def _read_authority(data: Mapping[str, Any], src: str) -> dict[str, AuthorityEntry]:
    """``[domains]``: a score in [0, 1] per domain (a bare number or a table), keyed in lower case."""
    authority: dict[str, AuthorityEntry] = {}
    for domain, entry in data.items():
        if isinstance(entry, int | float) and not isinstance(entry, bool):
            entry = {"score": entry}
        ae: AuthorityEntry = build(AuthorityEntry, entry, src, f"domains.{domain}")
        if not 0.0 <= ae.score <= 1.0:
            raise ConfigError(f"must be in [0, 1], got {ae.score}", source=src, key=f"domains.{domain}.score")
        authority[domain.lower()] = ae
    return authority


def _read_ingest(data: Any, src: str) -> IngestConfig:
    """``[ingest]``: positive limits, a non-negative synchronous-ingest threshold, valid allowlist and rule globs."""
    ingest: IngestConfig = build(IngestConfig, data, src, "ingest")
    globs = [(f"{name}[{i}]", g) for name in ("include", "exclude") for i, g in enumerate(getattr(ingest, name))]
    globs += [(f"trust.rules[{i}].glob", r.glob) for i, r in enumerate(ingest.trust.rules)]
    for key, glob in globs:
        try:
            PathGlob(glob)
        except ValueError as exc:
            raise ConfigError(str(exc), source=src, key=f"ingest.{key}") from None
    for name in ("max_entries", "max_body_bytes", "max_queued", "history", "replica_poll_s"):
        positive(getattr(ingest, name), src, f"ingest.{name}")
    if ingest.sync_max_entries < 0:
        raise ConfigError(f"must be >= 0, got {ingest.sync_max_entries}", source=src, key="ingest.sync_max_entries")
    return ingest


def _read_slowcook(data: Any, src: str) -> SlowCookConfig:
    """``[slowcook]``: a positive failure count, non-negative tolerances of known metrics."""
    cfg: SlowCookConfig = build(SlowCookConfig, data, src, "slowcook")
    positive(cfg.top_failures, src, "slowcook.top_failures")
    for metric, drop in cfg.tolerance.items():
        if metric not in METRIC_KEYS:
            valid = ", ".join(METRIC_KEYS)
            raise ConfigError(f"unknown metric; valid: {valid}", source=src, key=f"slowcook.tolerance.{metric}")
        if drop < 0:
            raise ConfigError(f"must be >= 0, got {drop}", source=src, key=f"slowcook.tolerance.{metric}")
    return cfg
