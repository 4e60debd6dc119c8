"""Building and warming what :meth:`fabric.query.engine.Engine.open` prepares: the configured lanes, the embedder,
fusion.

A lane whose backend cannot be built is recorded with the reason (the engine reports it in every result and
stays up); warm-ups are fail-open, so a slow model or a broken lane costs the first query nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, MutableSet
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime
from typing import Any

from fabric.core.errors import ConfigError
from fabric.core.logs import get_logger
from fabric.core.models import Embedder, Hit, LaneKind, LaneOutcome, LaneStatus
from fabric.query.penalties import ProviderPenalties
from fabric.settings import FusionConfig, LaneConfidence, LaneConfig, Settings
from fusion.pipeline import FusionContext, fuse
from lanes.base import Lane, LaneResources, LaneSpec
from lanes.registry import build_lane

__all__ = [
    "OPEN_TIMEOUT_S",
    "active_confidence",
    "build_lanes",
    "close_lanes",
    "lane_health",
    "needs_embedder",
    "open_lanes",
    "unavailable_lanes",
    "warm_embedder",
    "warm_fusion",
]

log = get_logger(__name__)

OPEN_TIMEOUT_S = 60.0
"""How long opening the lanes and loading the embedding model may take at engine start."""


def active_confidence(settings: Settings) -> dict[LaneKind, LaneConfidence]:
    """The ``[fusion.confidence]`` calibrations that apply: a nonzero slope, and measured with the engine's
    embedding model (a score's scale is its model's; another model's calibration would misjudge it)."""
    active: dict[LaneKind, LaneConfidence] = {}
    for kind, cal in settings.fusion.confidence.items():
        if cal.slope == 0.0:
            continue
        if cal.model and cal.model != settings.embeddings.model:
            log.info(
                "confidence_calibration_inactive", kind=kind, calibrated=cal.model, model=settings.embeddings.model
            )
            continue
        active[LaneKind(kind)] = cal
    return active


def build_lanes(settings: Settings, resources: LaneResources) -> tuple[dict[str, Lane], dict[str, str]]:
    """The enabled lanes plus their fallback targets, and the reason of each lane that could not be built."""
    lanes: dict[str, Lane] = {}
    errors: dict[str, str] = {}
    wanted: dict[str, LaneConfig | None] = {lc.name: lc for lc in settings.enabled_lanes()}
    for lc in list(wanted.values()):
        if lc is not None and lc.fallback and lc.fallback not in wanted:
            wanted[lc.fallback] = settings.lanes.get(lc.fallback)
    for name, lc in wanted.items():
        if lc is None:  # a pseudo-lane such as web_cache: its backend is its name
            parent = next(c for c in settings.lanes.values() if c.fallback == name)
            spec = LaneSpec(name=name, kind=parent.kind, backend=name, options=parent.options)
        else:
            spec = LaneSpec(name=name, kind=lc.kind, backend=lc.backend, options=lc.options)
        try:
            lanes[name] = build_lane(spec, resources)
        except Exception as exc:  # a broken backend is reported per query, never fatal to the engine
            msg = str(exc) if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}"
            errors[name] = f"lane could not be built: {msg}"
            log.warning("lane_build_failed", lane=name, backend=spec.backend, error=msg)
    return lanes, errors


def unavailable_lanes(settings: Settings, lanes: Mapping[str, Lane], build_errors: Mapping[str, str]) -> dict[str, str]:
    """Lane name → why it cannot run: its build error, or disabled in configuration (reported as ``error``)."""
    out = dict(build_errors)
    for lc in settings.lanes.values():
        if lc.name not in lanes and lc.name not in build_errors:
            out[lc.name] = f"lane disabled in configuration (lanes.{lc.name}.enabled = false)"
    return out


def needs_embedder(settings: Settings) -> bool:
    """Whether a configured real vector lane needs the embedder (fake lanes do not)."""
    return any(lc.kind is LaneKind.VECTOR and lc.backend != "fake" for lc in settings.lanes.values())


async def open_lanes(
    lanes: Mapping[str, Lane], names: Iterable[str], unopened: MutableSet[str], timeout_s: float
) -> None:
    """Open the lanes ``names`` concurrently, discarding each opened one from ``unopened``; fail-open per lane."""

    async def one(name: str) -> None:
        try:
            async with asyncio.timeout(timeout_s):
                await lanes[name].open()
            unopened.discard(name)
        except Exception as exc:  # the lane's search will fail and be reported; the engine stays up
            log.warning("lane_open_failed", lane=name, error=f"{type(exc).__name__}: {exc}")

    await asyncio.gather(*(one(n) for n in names))


async def close_lanes(lanes: Mapping[str, Lane]) -> None:
    """Close every lane; a lane that fails to close is logged and the others are still closed."""
    for name, lane in lanes.items():
        try:
            await lane.aclose()
        except Exception as exc:  # closing must close everything else too
            log.warning("lane_close_failed", lane=name, error=str(exc))


def lane_health(
    lanes: Mapping[str, Lane], build_errors: Mapping[str, str], unopened: AbstractSet[str], penalties: ProviderPenalties
) -> dict[str, Any]:
    """Each lane, built or not: opened, warming (:meth:`lanes.base.BaseLane.warming`; lanes without it never are),
    provider, build error and provider health (``Engine.health``)."""
    out: dict[str, Any] = {}
    for name in sorted(set(lanes) | set(build_errors)):
        lane = lanes.get(name)
        warming = getattr(lane, "warming", None)
        out[name] = {
            "built": lane is not None,
            "opened": lane is not None and name not in unopened,
            "warming": bool(warming()) if callable(warming) else False,
            "provider": lane.provider if lane is not None else None,
            "error": build_errors.get(name),
            "health": penalties.snapshot(lane.provider) if lane is not None else None,
        }
    return out


async def warm_embedder(embedder: Embedder | None) -> None:
    """Load the embedding model now rather than inside the first query's vector-lane budget.

    Uses the embedder's ``warm()`` (``fabric.embed.embeddings``; a cached embedder must load its model even when
    the warm-up text is cached) when it has one, else embeds a short text. Fail-open.
    """
    if embedder is None:
        return
    warm = getattr(embedder, "warm", None) or getattr(embedder, "warm_up", None)
    try:
        async with asyncio.timeout(OPEN_TIMEOUT_S):
            if callable(warm):
                await asyncio.to_thread(warm)
            else:
                await asyncio.to_thread(embedder.embed, ["warm-up"])
    except Exception as exc:  # the vector lane reports the embedder's failure per query; lexical lanes go on
        log.warning("embedder_warm_up_failed", error=f"{type(exc).__name__}: {exc}")


def warm_fusion(config: FusionConfig) -> None:
    """Run fusion once on a tiny synthetic input so the first query does not pay its first-call costs."""
    hits = tuple(
        Hit(id=f"warm-{i}", rank=i + 1, score=1.0 / (i + 1), title=f"warm {i}", text=f"warm up text {i}")
        for i in range(3)
    )
    outcomes = {
        name: LaneOutcome(lane=name, kind=kind, provider="warm", status=LaneStatus.SUCCESS, hits=hits)
        for name, kind in (("warm-a", LaneKind.KEYWORD), ("warm-b", LaneKind.VECTOR))
    }
    tuple(fuse(outcomes, FusionContext(config=config, now=datetime.now(UTC))).items)
