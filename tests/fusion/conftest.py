"""Builders for fusion tests: hits, lane outcomes and a context with fixed ``now``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from fabric.core.models import FusionMode, Hit, LaneKind, LaneOutcome, LaneStatus
from fabric.settings import AuthorityEntry, FactorWeights, FusionConfig
from fusion.types import FusionContext

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def hit(doc_id: str, rank: int = 1, score: float = 1.0, **kw: Any) -> Hit:
    """A hit with a distinct body per id unless ``text`` is given (so dedup leaves it alone)."""
    kw.setdefault("text", f"passage {doc_id} " + " ".join(f"w{doc_id}{i}" for i in range(12)))
    return Hit(id=doc_id, rank=rank, score=score, **kw)


def lane(
    name: str,
    ids: Iterable[str | Hit],
    *,
    kind: LaneKind = LaneKind.KEYWORD,
    weight: float = 1.0,
    status: LaneStatus = LaneStatus.SUCCESS,
    scores: Iterable[float] | None = None,
) -> LaneOutcome:
    """A lane outcome whose hits come in the given order (ranks 1..n, scores n..1 unless given)."""
    items = list(ids)
    sc = list(scores) if scores is not None else [float(len(items) - i) for i in range(len(items))]
    hits = tuple(
        x if isinstance(x, Hit) else hit(x, rank=r, score=s) for r, (x, s) in enumerate(zip(items, sc, strict=True), 1)
    )
    return LaneOutcome(lane=name, kind=kind, provider="test", status=status, hits=hits, weight=weight)


def outcomes(*lanes: LaneOutcome) -> dict[str, LaneOutcome]:
    """Outcomes keyed by lane name."""
    return {o.lane: o for o in lanes}


def context(
    mode: FusionMode = FusionMode.RRF,
    *,
    factors: FactorWeights | None = None,
    authority: Mapping[str, AuthorityEntry] | None = None,
    stage_of: Mapping[str, int] | None = None,
    **kw: Any,
) -> FusionContext:
    """A context at :data:`NOW` with default config unless overridden."""
    cfg = FusionConfig(mode=mode, factors=factors or FactorWeights())
    return FusionContext(config=cfg, now=NOW, authority=authority or {}, stage_of=stage_of or {}, **kw)


@pytest.fixture
def ctx() -> FusionContext:
    """The default RRF context."""
    return context()
