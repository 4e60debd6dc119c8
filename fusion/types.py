"""Types shared by the fusion stages: the context, the output, the per-query run and the ``Stage`` signature.

A *candidate* is a plain dict (a :class:`Candidate` ``TypedDict``) so the hot path allocates no per-item
objects beyond one dict; :class:`~fabric.models.FusedItem` objects are built once, at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypedDict, overload

from fabric.config import AuthorityEntry, FusionConfig
from fabric.models import FusedItem, FusionMode, Hit, LaneKind

__all__ = ["Candidate", "FusedItems", "FusionContext", "FusionOutput", "FusionRun", "LaneInfo", "Stage"]


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
    """Domain → authority entry (``config/authority.toml``)."""
    authority_default: float = 0.5
    """Authority of unlisted domains."""
    stage_of: Mapping[str, int] = field(default_factory=dict)
    """Lane → stage (1 must-first, 2 fill); default 1."""
    combmnz: bool = False
    """Score modes: force CombMNZ for this call (``config.combmnz`` turns it on for every call)."""
    dedup: bool = True
    """Whether cross-lane deduplication runs (ids are always merged)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FusionOutput:
    """The full ranked list (pagination is the caller's) and dedup counts."""

    items: Sequence[FusedItem]
    """Every fused item, best first (a :class:`FusedItems`: items are built when first read; slices are tuples)."""
    candidates: int
    """Hits received from usable lanes (before any merging)."""
    removed: int
    """``candidates - len(items)``: in-lane repeats, cross-lane same ids and merged duplicates."""
    duplicates: Mapping[str, int] = field(default_factory=dict)
    """Merges by criterion: ``content``, ``title``, ``url``, ``near``."""
    mode: FusionMode = FusionMode.RRF
    """The fusion mode that produced the order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LaneInfo:
    """What fusion knows about one usable lane."""

    weight: float
    """Fusion weight (configured weight × provider penalty)."""
    kind: LaneKind
    """Lane kind (``keyword`` → ``lexical`` component, ``vector`` → ``semantic``, ``graph`` → ``graph``)."""
    stage: int
    """0 for stage-1 lanes, 1 for stage-2 fill lanes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FusionRun:
    """One call's context: the caller's :class:`FusionContext` plus the usable lanes."""

    ctx: FusionContext
    """The caller's context."""
    mode: FusionMode
    """Effective mode (request override or config)."""
    lanes: Mapping[str, LaneInfo]
    """Usable lanes (status success/fallback with hits), sorted by name."""


class Candidate(TypedDict):
    """One fused candidate during the pipeline (a plain dict in the hot path)."""

    id: str
    """Item id of the representative hit."""
    hit: Hit
    """Representative hit: the best-ranked occurrence."""
    ranks: dict[str, int]
    """Lane → best 1-based rank (position after in-lane duplicates are collapsed)."""
    native: dict[str, float]
    """Lane → the lane's native score at that rank."""
    norm: dict[str, float]
    """Lane → normalised score (score modes only; empty otherwise)."""
    stage: int
    """0 if any stage-1 lane returned it, else 1."""
    best: int
    """Best rank over its lanes (the tie-break's "best source rank")."""
    merged: list[str]
    """Ids of duplicates merged into this candidate."""
    scores: dict[str, float]
    """Components, filled by the stages."""
    base: float
    """The mode's fusion score normalised to [0, 1] (the 50 % factor)."""
    total: float
    """Final ranking score in [0, 1]."""


class FusedItems(Sequence[FusedItem]):
    """The ranked list, turning a candidate into a :class:`FusedItem` only when it is read.

    The engine usually reads one page of ``top_k`` out of a few hundred candidates, so freezing every
    candidate would be most of fusion's cost. Built items are cached; a slice returns a tuple.
    """

    __slots__ = ("_built", "_cands")

    def __init__(self, cands: list[Candidate]) -> None:
        """Wrap candidates that are already in ranking order (they must not change afterwards)."""
        self._cands = cands
        self._built: list[FusedItem | None] = [None] * len(cands)

    def __len__(self) -> int:
        """Number of items."""
        return len(self._cands)

    def _item(self, i: int) -> FusedItem:
        item = self._built[i]
        if item is None:
            c = self._cands[i]
            item = self._built[i] = FusedItem(
                hit=c["hit"],
                score_total=c["total"],
                scores=c["scores"],
                lanes=tuple(sorted(c["ranks"])),
                ranks=c["ranks"],
                stage_priority=c["stage"],
                merged_ids=tuple(sorted(c["merged"])),
            )
        return item

    @overload
    def __getitem__(self, index: int) -> FusedItem: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[FusedItem, ...]: ...

    def __getitem__(self, index: int | slice) -> FusedItem | tuple[FusedItem, ...]:
        """One item, or a tuple for a slice."""
        if isinstance(index, slice):
            return tuple(self._item(i) for i in range(*index.indices(len(self._cands))))
        n = len(self._cands)
        if not -n <= index < n:
            raise IndexError("fused item index out of range")
        return self._item(index % n)

    def __iter__(self) -> Iterator[FusedItem]:
        """Items best first."""
        return (self._item(i) for i in range(len(self._cands)))

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence with the same items in the same order."""
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        """Short form: the count only."""
        return f"FusedItems({len(self)} items)"


Stage = Callable[[list[Candidate], FusionRun], list[Candidate]]
"""Every fusion stage: candidates plus the run in, candidates out. Parameters go in ``__init__``."""
