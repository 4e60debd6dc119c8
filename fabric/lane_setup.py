"""Building and warming what :meth:`fabric.engine.Engine.open` prepares: the configured lanes, the embedder, fusion.

A lane whose backend cannot be built is recorded with the reason (the engine reports it in every result and
stays up); warm-ups are fail-open, so a slow model or a broken lane costs the first query nothing.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import structlog

from fabric.config import FusionConfig, LaneConfig, Settings
from fabric.errors import ConfigError
from fabric.models import Embedder, Hit, LaneKind, LaneOutcome, LaneStatus
from fusion.pipeline import FusionContext, fuse
from lanes.base import Lane, LaneResources, LaneSpec
from lanes.registry import build_lane

__all__ = ["OPEN_TIMEOUT_S", "build_lanes", "warm_embedder", "warm_fusion"]

log = structlog.get_logger(__name__)

OPEN_TIMEOUT_S = 60.0
"""How long opening the lanes and loading the embedding model may take at engine start."""


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


async def warm_embedder(embedder: Embedder | None) -> None:
    """Load the embedding model now rather than inside the first query's vector-lane budget.

    Uses the embedder's ``warm()`` (``fabric.embeddings``; a cached embedder must load its model even when
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
