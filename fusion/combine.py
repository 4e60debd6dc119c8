"""Turn lane outcomes into the candidate table, and score it with the selected :class:`~fabric.core.models.FusionMode`.

:func:`collect` keeps the usable lanes (status ``success`` or ``fallback`` with hits), collapses repeated ids
inside a lane (first occurrence wins; the ranks after it close up) and merges the same id across lanes into one
row whose representative hit is its best-ranked occurrence, a vouched-for one first (:mod:`fusion.provenance`: a
stored entry posted under a web result's id never stands for that result). :class:`ModeScorer` is the stage that
runs after deduplication and sets the raw ``rrf`` column and ``base`` (the mode's score on [0, 1]):

- ``rrf``: ``base = rrf / rrf_ceiling(weights)``;
- ``append_fill`` (the staged-retrieval policy): RRF computed separately over stage-1 lanes and over stage-2 lanes, each
over its
  own ceiling; ranking keeps every stage-1 item ahead of every stage-2 item;
- ``score_minmax`` / ``score_dbsf`` / ``score_zscore``: ``base = Σ w · norm / Σ w`` (CombMNZ: ``× lanes / lane count``).

Lane weights are applied in every mode. Merged duplicates were mapped to their representative before scoring
(:mod:`fusion.dedup`), so a lane that returned two copies contributes once, at the better rank. Sums run lane by
lane in name order, exactly as :func:`fusion.rrf.fuse_rrf` and :func:`fusion.score.fuse_scores` add them. The
per-lane native components (``lexical`` / ``semantic`` / ``graph``) are read off the table when an item is built
(:class:`~fusion.types.FusedItems`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fabric.core.models import FusionMode, Hit, LaneKind, LaneOutcome, LaneStatus
from fusion.provenance import FETCHING_KINDS, vouched
from fusion.rrf import rrf_ceiling
from fusion.score import NORMALISERS
from fusion.types import Candidates, FusionContext, FusionRun, LaneInfo

__all__ = ["COMPONENT_OF_KIND", "ModeScorer", "collect"]

_USABLE = (LaneStatus.SUCCESS, LaneStatus.FALLBACK)

COMPONENT_OF_KIND: dict[LaneKind, str] = {
    LaneKind.KEYWORD: "lexical",
    LaneKind.VECTOR: "semantic",
    LaneKind.GRAPH: "graph",
}
"""Lane kind → per-lane native score component name."""


def collect(outcomes: Mapping[str, LaneOutcome], ctx: FusionContext) -> tuple[FusionRun, Candidates]:
    """Build the run and the candidate table: one row per distinct id, each usable lane's collapsed ranking."""
    mode = ctx.mode or ctx.config.mode
    normalise = NORMALISERS.get(mode.value)
    usable = [(n, out) for n, out in sorted(outcomes.items()) if out.status in _USABLE and out.hits]
    cands = Candidates(tuple(n for n, _ in usable))
    stage_of = ctx.stage_of
    hits = [out.hits for _, out in usable]
    stages = [0 if stage_of.get(n, 1) <= 1 else 1 for n, _ in usable] if stage_of else [0] * len(usable)
    lanes = {n: LaneInfo(out.weight, out.kind, st) for (n, out), st in zip(usable, stages, strict=True)}
    cands.received = sum(map(len, hits))
    _collect_rows(hits, stages, [out.kind in FETCHING_KINDS for _, out in usable], cands)
    cands.norm = [normalise(native) for native in cands.native] if normalise is not None else [[] for _ in usable]
    return FusionRun(ctx=ctx, mode=mode, lanes=lanes), cands


def _collect_rows(
    lanes: Sequence[Sequence[Hit]], stages: Sequence[int], fetching: Sequence[bool], cands: Candidates
) -> None:
    """The rows of :func:`collect`: ids, representatives (and whether their lane fetched them), stages and best
    ranks, and each lane's rows."""
    pos: dict[str, int] = {}
    ids, reps, rep_stage, best = cands.ids, cands.hits, cands.stage, cands.best
    for hits, stage, fetched in zip(lanes, stages, fetching, strict=True):
        lane_ids = [h.id for h in hits]
        if len(set(lane_ids)) != len(lane_ids):  # a repeat inside the lane counts once, at its first position
            first = dict(zip(reversed(lane_ids), range(len(lane_ids) - 1, -1, -1), strict=True))
            keep = sorted(first.values())
            hits, lane_ids = [hits[i] for i in keep], [lane_ids[i] for i in keep]
        found = list(map(pos.get, lane_ids))
        start = len(ids)
        if start == 0 or found.count(None) == len(found):  # every id is new (always so in the first lane)
            rows = list(range(start, start + len(lane_ids)))
            pos.update(zip(lane_ids, rows, strict=True))
            ids += lane_ids
            reps += hits
            rep_stage += [stage] * len(rows)
            cands.fetched += [fetched] * len(rows)
            best += range(1, len(rows) + 1)
        else:
            rows = _merge_lane(found, lane_ids, hits, (stage, fetched), cands, pos)
        cands.rows.append(rows)
        cands.native.append([h.score for h in hits])


def _merge_lane(
    found: list[int | None],
    lane_ids: list[str],
    hits: Sequence[Hit],
    lane: tuple[int, bool],
    cands: Candidates,
    pos: dict[str, int],
) -> list[int]:
    """The rows of one lane's ids, in rank order: new ids get new rows (in rank order), known ids update theirs.

    ``lane`` is the lane's stage and whether it fetches its items. A lane holds each id once, so the new rows and
    the updates of known rows do not interact: the new ones are appended in one step, and only the known ones take
    a Python loop.
    """
    ids, reps, stages, best, fetched = cands.ids, cands.hits, cands.stage, cands.best, cands.fetched
    stage, fetches = lane
    rows = list(found)
    new = [k for k, j in enumerate(found) if j is None]
    start = len(ids)
    new_ids = [lane_ids[k] for k in new]
    for row, k in enumerate(new, start):
        rows[k] = row
    pos.update(zip(new_ids, range(start, start + len(new)), strict=True))
    ids += new_ids
    reps += [hits[k] for k in new]
    stages += [stage] * len(new)
    fetched += [fetches] * len(new)
    best += [k + 1 for k in new]
    for rank, j, h in zip(range(1, len(found) + 1), found, hits, strict=True):
        if j is None:
            continue
        # The representative moves to this occurrence when it is ahead by (vouched for, stage, rank) of the
        # current (vouched for, stage, best rank so far); lanes come in name order, so the first lane wins a tie.
        here, there = vouched(h, fetches), vouched(reps[j], fetched[j])
        if here > there or (here == there and (stage < stages[j] or (stage == stages[j] and rank < best[j]))):
            reps[j], fetched[j] = h, fetches
        if stage < stages[j]:
            stages[j] = stage
        if rank < best[j]:
            best[j] = rank
    return rows  # type: ignore[return-value]


def _lane_sums(cands: Candidates, weights: Sequence[float], k: int, lanes: Sequence[int]) -> list[float]:
    """``0.0 + Σ w / (k + rank)`` over ``lanes`` per row, added lane by lane as :func:`fusion.rrf.fuse_rrf` does."""
    sums = [0.0] * len(cands)
    for lane in lanes:
        rows, w = cands.rows[lane], weights[lane]
        for j, add in zip(rows, [w / (k + r) for r in range(1, len(rows) + 1)], strict=True):
            sums[j] += add
    return sums


class ModeScorer:
    """Stage: the mode's ``base`` in [0, 1], and the ``rrf`` column (or, outside ``rrf`` mode, its terms)."""

    def __call__(self, cands: Candidates, run: FusionRun) -> Candidates:
        """Score ``cands`` (after deduplication) in ``run.mode``."""
        k = run.ctx.config.rrf_k
        if k <= 0:
            raise ValueError(f"k must be > 0, got {k}")
        infos = [run.lanes[name] for name in cands.lanes]
        weights = [info.weight for info in infos]
        n = len(cands)
        if run.mode is FusionMode.RRF:
            cands.rrf = rrf = _lane_sums(cands, weights, k, range(len(infos)))
            ceiling = rrf_ceiling(weights, k=k)
            cands.base = [s / ceiling for s in rrf] if ceiling > 0 else [0.0] * n
            return cands
        cands.rrf_terms = (weights, k)  # the rrf column is not ranked on here: summed per item when it is read
        if run.mode is FusionMode.APPEND_FILL:
            cands.base = _staged_base(cands, infos, k)
        else:
            cands.base = _score_base(cands, weights, run.ctx.combmnz or run.ctx.config.combmnz)
        return cands


def _staged_base(cands: Candidates, infos: Sequence[LaneInfo], k: int) -> list[float]:
    weights = [info.weight for info in infos]
    base = [0.0] * len(cands)
    for stage in (1, 0):  # stage 0 last so an item in both stages keeps its stage-1 score
        lanes = [lane for lane, info in enumerate(infos) if info.stage == stage]
        ceiling = rrf_ceiling([weights[lane] for lane in lanes], k=k)
        sums = _lane_sums(cands, weights, k, lanes)
        for j in {j for lane in lanes for j in cands.rows[lane]}:
            base[j] = sums[j] / ceiling if ceiling > 0 else 0.0
    return base


def _score_base(cands: Candidates, weights: Sequence[float], combmnz: bool) -> list[float]:
    """``fuse_scores(norm, weights) / ceiling`` per row, the terms added in the order the row's lanes joined it."""
    n = len(cands)
    ceiling = sum(max(w, 0.0) for w in weights) * (len(weights) if combmnz else 1)
    if ceiling <= 0:
        return [0.0] * n
    total = [0.0] * n
    for rows, norm, w in zip(cands.rows, cands.norm, weights, strict=True):
        for j, value in zip(rows, norm, strict=True):
            total[j] += w * value
    for row, lanes in cands.lane_order.items():  # merged rows: their own lane order (float sums are not associative)
        t = 0.0
        for lane in lanes:
            t += weights[lane] * cands.norm[lane][cands.rows[lane].index(row)]
        total[row] = t
    if combmnz:
        count = [0] * n
        for rows in cands.rows:
            for j in rows:
                count[j] += 1
        return [t * c / ceiling for t, c in zip(total, count, strict=True)]
    return [t / ceiling for t in total]
