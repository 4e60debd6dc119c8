"""Reading and checking ``[fusion]`` and ``[engine]``: the typed sections built, then their values checked.

Every bad value is a :class:`~fabric.core.errors.ConfigError` naming the file and the dotted key.
"""

from __future__ import annotations

import math
from typing import Any

from fabric.core.errors import ConfigError
from fabric.core.models import LaneKind
from fabric.settings.readers import build, positive
from fabric.settings.sections import EngineConfig, FusionConfig, LaneConfidence

__all__ = ["FACTOR_SCALINGS", "SOURCE_BINDINGS", "STAGED_RANKINGS", "read_engine", "read_fusion"]

FACTOR_SCALINGS = ("normalised", "literal")
"""``[fusion] factor_scaling``: how the ranking factors are combined (:mod:`fusion.rank`, :mod:`fusion.literal`)."""
STAGED_RANKINGS = ("factors", "fused")
"""``[fusion.stages] ranking``: how a staged fusion is ordered (:mod:`fusion.literal`)."""
SOURCE_BINDINGS = ("filter", "sites")
"""``[engine] source_binding``: what the ``sources`` constraint keeps (:mod:`fabric.query.constraints`)."""


def _choice(value: str, valid: tuple[str, ...], src: str, key: str) -> None:
    if value not in valid:
        raise ConfigError(f"unknown value {value!r}; valid: {', '.join(valid)}", source=src, key=key)


def _not_negative(value: float, src: str, key: str) -> None:
    if value < 0:
        raise ConfigError(f"must be >= 0, got {value!r}", source=src, key=key)


def read_fusion(data: Any, src: str) -> FusionConfig:
    """``[fusion]``: a positive k and stage budgets, known switches, non-negative boosts and dedup weights, and
    recency steps as (days, step) pairs in increasing age."""
    fusion: FusionConfig = build(FusionConfig, data, src, "fusion")
    positive(fusion.rrf_k, src, "fusion.rrf_k")
    for key in ("min_must_count", "stage1_top_n", "stage2_top_n", "max_appended", "p95_target_ms"):
        positive(getattr(fusion.stages, key), src, f"fusion.stages.{key}")
    _choice(fusion.factor_scaling, FACTOR_SCALINGS, src, "fusion.factor_scaling")
    _choice(fusion.stages.ranking, STAGED_RANKINGS, src, "fusion.stages.ranking")
    for key in ("title", "content", "url", "near"):
        _not_negative(getattr(fusion.dedup.weights, key), src, f"fusion.dedup.weights.{key}")
    boosts = fusion.boosts
    _not_negative(boosts.domain, src, "fusion.boosts.domain")
    _not_negative(boosts.recency, src, "fusion.boosts.recency")
    last = -1.0
    for i, step in enumerate(boosts.recency_steps):
        key = f"fusion.boosts.recency_steps[{i}]"
        if len(step) != 2:
            raise ConfigError(f"expected [days, step], got {list(step)!r}", source=src, key=key)
        if step[0] <= last:
            raise ConfigError(f"days must increase, got {step[0]!r} after {last!r}", source=src, key=key)
        last = step[0]
    for kind, cal in fusion.confidence.items():
        _check_confidence(kind, cal, src)
    return fusion


def _check_confidence(kind: str, cal: LaneConfidence, src: str) -> None:
    """``[fusion.confidence.<kind>]``: a lane kind, a finite reference, a slope >= 0 and 0 < min <= 1 <= max."""
    key = f"fusion.confidence.{kind}"
    if kind not in {k.value for k in LaneKind}:
        raise ConfigError(f"unknown lane kind; valid: {', '.join(k.value for k in LaneKind)}", source=src, key=key)
    if not math.isfinite(cal.reference):
        raise ConfigError(f"must be a finite number, got {cal.reference!r}", source=src, key=f"{key}.reference")
    if not (math.isfinite(cal.slope) and cal.slope >= 0):
        raise ConfigError(f"must be a finite number >= 0, got {cal.slope!r}", source=src, key=f"{key}.slope")
    if not 0 < cal.min <= 1:
        raise ConfigError(f"must be > 0 and <= 1, got {cal.min!r}", source=src, key=f"{key}.min")
    if not (math.isfinite(cal.max) and cal.max >= 1):
        raise ConfigError(f"must be a finite number >= 1, got {cal.max!r}", source=src, key=f"{key}.max")


def read_engine(data: Any, src: str) -> EngineConfig:
    """``[engine]``: a known source binding and a non-negative ``all_time_years``."""
    engine: EngineConfig = build(EngineConfig, data, src, "engine")
    _choice(engine.source_binding, SOURCE_BINDINGS, src, "engine.source_binding")
    _not_negative(engine.all_time_years, src, "engine.all_time_years")
    return engine
