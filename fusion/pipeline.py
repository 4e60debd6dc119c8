"""The fusion entry point the engine calls: lane outcomes → ranked, deduplicated :class:`FusedItem` list.

``fuse(outcomes, ctx)`` is pure: same inputs, byte-identical output. Time (``ctx.now``) is passed in.
The stages, in order (each a :data:`fusion.types.Stage`)::

    collect  → Deduplicator → ModeScorer → DomainDiversityBooster → RecencyBooster
             → AuthorityBooster → QualityBooster → Ranker → FusedItems (frozen lazily, page by page)

Deduplication runs before scoring so that merged duplicates are scored once, from their best rank per lane.
The configuration may rank by the fusion policy's formulas as written or order a staged fusion by its fused score
alone (:mod:`fusion.literal`) instead of the ranker.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from fabric.core.models import LaneOutcome
from fabric.settings import FactorWeights
from fusion.boosts import AuthorityBooster, DomainDiversityBooster, QualityBooster, RecencyBooster
from fusion.combine import COMPONENT_OF_KIND, ModeScorer, collect
from fusion.dedup import Deduplicator
from fusion.literal import policy_ranker
from fusion.rank import Ranker
from fusion.types import FusedItems, FusionContext, FusionOutput, Stage

__all__ = ["FusedItems", "FusionContext", "FusionOutput", "fuse"]

_BOOSTERS: tuple[Stage, ...] = (DomainDiversityBooster(), RecencyBooster(), AuthorityBooster(), QualityBooster())
_SCORING: tuple[Stage, ...] = (ModeScorer(), *_BOOSTERS)
"""The stages after deduplication that take no parameters (built once: a stage keeps no state between calls)."""


@lru_cache(maxsize=32)
def _ranker(weights: FactorWeights) -> Ranker:
    """The ranking stage for ``weights`` (frozen, so one per configuration serves every call)."""
    return Ranker(weights)


def fuse(outcomes: Mapping[str, LaneOutcome], ctx: FusionContext) -> FusionOutput:
    """Fuse usable lane outcomes, deduplicate, boost and rank them in the deterministic order.

    Order: ``(score desc, stage_priority asc, best source rank asc, id asc)`` (see :mod:`fusion.rank`).
    """
    run, cands = collect(outcomes, ctx)
    counts = dict.fromkeys(("content", "title", "url", "near"), 0)

    def merged(criteria: list[str]) -> None:
        for why in criteria:
            counts[why] = counts.get(why, 0) + 1

    if ctx.dedup:
        cands = Deduplicator(ctx.config.dedup, merged)(cands, run)
    for stage in _SCORING:
        cands = stage(cands, run)
    cands = (policy_ranker(ctx.config, run) or _ranker(ctx.config.factors))(cands, run)  # fusion.literal
    components = [COMPONENT_OF_KIND.get(run.lanes[name].kind) for name in cands.lanes]
    return FusionOutput(
        items=FusedItems(cands, components),
        candidates=cands.received,
        removed=cands.received - len(cands),
        duplicates=counts,
        mode=run.mode,
    )
