"""The fusion entry point the engine calls: lane outcomes → ranked, deduplicated :class:`FusedItem` list.

``fuse(outcomes, ctx)`` is pure: same inputs, byte-identical output. Time (``ctx.now``) is passed in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from fabric.config import AuthorityEntry, FusionConfig
from fabric.models import FusedItem, FusionMode, Hit, LaneKind, LaneOutcome, LaneStatus
from fusion.rrf import fuse_rrf

__all__ = ["FusionContext", "FusionOutput", "fuse"]

_USABLE = (LaneStatus.SUCCESS, LaneStatus.FALLBACK)


@dataclass(frozen=True, slots=True, kw_only=True)
class FusionContext:
    """Everything fusion needs besides the outcomes."""

    config: FusionConfig
    """Fusion settings (mode, k, factor weights, dedup thresholds)."""
    now: datetime
    """Reference time for recency (fusion reads no clock)."""
    mode: FusionMode | None = None
    """Per-request override of ``config.mode``."""
    authority: Mapping[str, AuthorityEntry] = field(default_factory=dict)
    """Domain → authority entry."""
    authority_default: float = 0.5
    """Authority of unlisted domains."""
    stage_of: Mapping[str, int] = field(default_factory=dict)
    """Lane → stage (1 must-first, 2 fill); default 1."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FusionOutput:
    """The full ranked list (pagination is the caller's) and dedup counts."""

    items: tuple[FusedItem, ...]
    candidates: int
    removed: int


def _lane_component(kind: LaneKind) -> str | None:
    return {LaneKind.KEYWORD: "lexical", LaneKind.VECTOR: "semantic", LaneKind.GRAPH: "graph"}.get(kind)


def fuse(outcomes: Mapping[str, LaneOutcome], ctx: FusionContext) -> FusionOutput:
    """Fuse usable lane outcomes with weighted RRF and order by the deterministic tie-break.

    Order: ``(score desc, stage_priority asc, best source rank asc, id asc)``.
    """
    usable = {name: out for name, out in outcomes.items() if out.status in _USABLE and out.hits}
    rankings = {name: [h.id for h in out.hits] for name, out in usable.items()}
    weights = {name: out.weight for name, out in usable.items()}
    rrf = fuse_rrf(rankings, k=ctx.config.rrf_k, weights=weights)
    best: dict[str, Hit] = {}
    lanes: dict[str, list[str]] = {}
    ranks: dict[str, dict[str, int]] = {}
    comps: dict[str, dict[str, float]] = {}
    stage: dict[str, int] = {}
    candidates = 0
    for name in sorted(usable):
        out = usable[name]
        comp = _lane_component(out.kind)
        for h in out.hits:
            candidates += 1
            if name in ranks.get(h.id, {}):
                continue
            if h.id not in best or h.rank < best[h.id].rank:
                best[h.id] = h
            lanes.setdefault(h.id, []).append(name)
            ranks.setdefault(h.id, {})[name] = h.rank
            if comp:
                comps.setdefault(h.id, {})[comp] = max(comps.get(h.id, {}).get(comp, 0.0), h.score)
            stage[h.id] = min(stage.get(h.id, 9), ctx.stage_of.get(name, 1))
    items = [
        FusedItem(
            hit=best[i],
            score_total=rrf.get(i, 0.0),
            scores={"rrf": rrf.get(i, 0.0), **comps.get(i, {})},
            lanes=tuple(lanes[i]),
            ranks=ranks[i],
            stage_priority=stage[i] - 1,
        )
        for i in best
    ]
    items.sort(key=lambda it: (-it.score_total, it.stage_priority, min(it.ranks.values()), it.id))
    return FusionOutput(items=tuple(items), candidates=candidates, removed=candidates - len(items))
