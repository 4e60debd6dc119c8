"""Types shared by the fusion stages: the context, the output, the per-query run and the ``Stage`` signature.

Candidates travel through the stages as one column table (:class:`Candidates`), so the hot path allocates
no per-item objects; :class:`~fabric.core.models.FusedItem` objects are built only for the items that are read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple, overload

from fabric.core.models import FusedItem, FusionMode, Hit, LaneKind, make_fused_item
from fabric.settings import AuthorityEntry, FusionConfig

__all__ = ["Candidates", "FusedItems", "FusionContext", "FusionOutput", "FusionRun", "LaneInfo", "Stage"]


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
    """Domain → authority entry (``fabric/config/authority.toml``)."""
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


class LaneInfo(NamedTuple):
    """What fusion knows about one usable lane (a named tuple: built once per lane per call, it must be cheap)."""

    weight: float
    """Fusion weight (configured weight × provider penalty × lane confidence, :mod:`fusion.confidence`)."""
    kind: LaneKind
    """Lane kind (``keyword`` → ``lexical`` component, ``vector`` → ``semantic``, ``graph`` → ``graph``)."""
    stage: int
    """0 for stage-1 lanes, 1 for stage-2 fill lanes."""


class FusionRun(NamedTuple):
    """One call's context: the caller's :class:`FusionContext` plus the usable lanes (a named tuple: cheap)."""

    ctx: FusionContext
    """The caller's context."""
    mode: FusionMode
    """Effective mode (request override or config)."""
    lanes: Mapping[str, LaneInfo]
    """Usable lanes (status success/fallback with hits), sorted by name."""


class Candidates:
    """The candidate table of one call: one row per distinct item, every attribute a column (a plain list).

    Stages read and write whole columns instead of one dict per candidate, so the hot path costs a few C-level
    passes over the candidates rather than dozens of dict operations per item; per-item dicts (``scores``,
    ``ranks``) are only built for the items that are read (:class:`FusedItems`).

    Per lane (in :attr:`lanes` order), ``rows[l][r - 1]`` is the row of the item at 1-based rank ``r`` (repeats
    inside a lane collapsed, ranks closed up), with that occurrence's native score in ``native[l]`` and, in the
    score modes, its normalised score in ``norm[l]``.
    """

    __slots__ = (
        "base", "best", "factors", "fetched", "hits", "ids", "lane_order", "lanes", "merged", "native", "norm",
        "order", "received", "rows", "rrf", "rrf_terms", "stage", "total",
    )  # fmt: skip

    def __init__(self, lanes: tuple[str, ...]) -> None:
        """An empty table over the usable ``lanes`` (sorted by name)."""
        self.lanes = lanes
        """Usable lanes, sorted by name (the order of every per-lane column)."""
        self.rows: list[list[int]] = []
        """Per lane: the row at each rank."""
        self.native: list[list[float]] = []
        """Per lane: the native score at each rank."""
        self.norm: list[list[float]] = []
        """Per lane: the normalised score at each rank (score modes; empty lists otherwise)."""
        self.ids: list[str] = []
        """Item id of each row (its representative hit's id)."""
        self.hits: list[Hit] = []
        """Representative hit of each row: its best-ranked occurrence (stage-1 lanes first)."""
        self.stage: list[int] = []
        """0 if any stage-1 lane returned the row (or a duplicate merged into it), else 1."""
        self.fetched: list[bool] = []
        """Whether each row's representative hit came from a lane that fetched it itself (its URL is where the lane
        found it, not a stored claim: :mod:`fusion.provenance`)."""
        self.best: list[int] = []
        """Best rank over the row's lanes (the tie-break's "best source rank")."""
        self.merged: dict[int, list[str]] = {}
        """Row → ids of the duplicates merged into it (rows without merges are absent)."""
        self.lane_order: dict[int, list[int]] = {}
        """Row → its lanes (indices) in the order they joined it, for merged rows whose order is not the sorted one."""
        self.rrf: list[float] = []
        """Raw weighted RRF of each row (``rrf`` mode; the other modes leave it empty and set :attr:`rrf_terms`)."""
        self.rrf_terms: tuple[list[float], int] | None = None
        """Lane weights and k when the RRF column is left to the items read (summed lane by lane, the same floats)."""
        self.base: list[float] = []
        """The mode's fusion score of each row on [0, 1] (the 50 % factor, ``scores["fused"]``)."""
        self.factors: dict[str, list[float]] = {}
        """Ranking factor → its column on [0, 1] (``domain_diversity``, ``recency``, ``authority``, ``quality``)."""
        self.total: list[float] = []
        """Final ranking score of each row in [0, 1]."""
        self.order: list[int] = []
        """Rows best first (set by the ranker)."""
        self.received = 0
        """Hits received from the usable lanes (before any merging)."""

    def __len__(self) -> int:
        """Number of rows."""
        return len(self.ids)


class FusedItems(Sequence[FusedItem]):
    """The ranked list, turning a candidate row into a :class:`FusedItem` only when it is read.

    The engine usually reads one page of ``top_k`` out of a few hundred candidates, so freezing every
    candidate would be most of fusion's cost. Built items are cached; a slice returns a tuple, its items frozen
    in one pass; iterating freezes every item first.
    """

    __slots__ = ("_built", "_cands", "_components", "_ranks")

    def __init__(self, cands: Candidates, components: Sequence[str | None] = ()) -> None:
        """Wrap a ranked table (``cands.order`` set; it must not change afterwards).

        Args:
            cands: the ranked candidate table.
            components: per lane, the native score component its kind fills (``lexical``, ...) or None.
        """
        self._cands = cands
        self._components = tuple(components) or (None,) * len(cands.lanes)
        self._built: list[FusedItem | None] = [None] * len(cands.order)
        self._ranks: list[dict[int, int]] | None = None

    def __len__(self) -> int:
        """Number of items."""
        return len(self._built)

    def _item(self, i: int) -> FusedItem:
        item = self._built[i]
        if item is None:
            self._build((i,))
            item = self._built[i]
            assert item is not None
        return item

    def _build(self, positions: Iterable[int]) -> None:
        """Freeze the items at ``positions`` (best-first indices) that are not built yet, in one pass."""
        built = self._built
        todo = [i for i in positions if built[i] is None]
        if not todo:
            return
        c = self._cands
        order, merged, lane_order = c.order, c.merged, c.lane_order
        if self._ranks is None:  # lane → {row: rank}, built once, on the first read
            self._ranks = [dict(zip(rows, range(1, len(rows) + 1), strict=True)) for rows in c.rows]
        lanes = list(zip(self._ranks, c.lanes, self._components, c.native, strict=True))
        rrf, base, total, stage, hits = c.rrf, c.base, c.total, c.stage, c.hits
        factors = list(c.factors.items())
        lane_weight, k = (dict(zip(c.lanes, c.rrf_terms[0], strict=True)), c.rrf_terms[1]) if c.rrf_terms else ({}, 0)
        for i in todo:
            row = order[i]
            ranks: dict[str, int] = {}
            scores: dict[str, float] = {"rrf": rrf[row] if rrf else 0.0}
            if row in lane_order:
                ranks = {name: r for at, name, _, _ in lanes if (r := at.get(row)) is not None}
                self._merged_components(row, scores)
            else:  # lanes in index order: components are filled in the same pass
                for at, name, comp, native in lanes:
                    r = at.get(row)
                    if r is not None:
                        ranks[name] = r
                        if comp is not None:
                            value = native[r - 1]
                            if value > scores.get(comp, -math.inf):
                                scores[comp] = value
            if lane_weight:  # 0.0 + Σ w / (k + rank), lane by lane in index order, as the column would hold
                total_rrf = 0.0
                for name, r in ranks.items():
                    total_rrf += lane_weight[name] / (k + r)
                scores["rrf"] = total_rrf
            for name, column in factors:
                scores[name] = column[row]
            scores["fused"] = base[row]
            built[i] = make_fused_item(
                hits[row],
                total[row],
                scores,
                tuple(ranks),
                ranks,
                stage[row],
                tuple(sorted(merged[row])) if row in merged else (),
            )

    def _merged_components(self, row: int, scores: dict[str, float]) -> None:
        """The native score components of a merged row, its lanes taken in the order they joined it."""
        c = self._cands
        assert self._ranks is not None
        for lane in c.lane_order[row]:
            comp = self._components[lane]
            r = self._ranks[lane].get(row)
            if comp is not None and r is not None:
                value = c.native[lane][r - 1]
                if value > scores.get(comp, -math.inf):
                    scores[comp] = value

    @overload
    def __getitem__(self, index: int) -> FusedItem: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[FusedItem, ...]: ...

    def __getitem__(self, index: int | slice) -> FusedItem | tuple[FusedItem, ...]:
        """One item, or a tuple for a slice."""
        if isinstance(index, slice):
            self._build(range(*index.indices(len(self._built))))
            return tuple(self._built[index])  # type: ignore[arg-type]
        n = len(self._built)
        if not -n <= index < n:
            raise IndexError("fused item index out of range")
        return self._item(index % n)

    def __iter__(self) -> Iterator[FusedItem]:
        """Items best first (all of them are frozen before the first is returned)."""
        self._build(range(len(self._built)))
        return iter(self._built)  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence with the same items in the same order."""
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        """Short form: the count only."""
        return f"FusedItems({len(self)} items)"


Stage = Callable[[Candidates, FusionRun], Candidates]
"""Every fusion stage: candidates plus the run in, candidates out. Parameters go in ``__init__``."""
