"""Turn lane outcomes into candidates, and score them with the selected :class:`~fabric.models.FusionMode`.

:func:`collect` keeps the usable lanes (status ``success`` or ``fallback`` with hits), collapses repeated ids
inside a lane (first occurrence wins; the ranks after it close up) and merges the same id across lanes into one
candidate whose representative hit is its best-ranked occurrence. :class:`ModeScorer` is the stage that runs
after deduplication and sets, per candidate, the raw ``rrf`` component, the per-lane native ``lexical`` /
``semantic`` / ``graph`` components, the final per-lane ranks and ``base`` (the mode's score on [0, 1]):

- ``rrf``: ``base = rrf / rrf_ceiling(weights)``;
- ``append_fill`` (seed 000): RRF computed separately over stage-1 lanes and over stage-2 lanes, each over its
  own ceiling; ranking keeps every stage-1 item ahead of every stage-2 item;
- ``score_minmax`` / ``score_dbsf``: ``base = Σ w · norm / Σ w`` (CombMNZ: ``× lanes / lane count``).

Lane weights are applied in every mode. Merged duplicates are mapped to their representative before RRF, so a
lane that returned two copies contributes once, at the better rank.
"""

from __future__ import annotations

from collections.abc import Mapping

from fabric.models import FusionMode, LaneKind, LaneOutcome, LaneStatus
from fusion.rrf import fuse_rrf, rrf_ceiling
from fusion.score import NORMALISERS, fuse_scores
from fusion.types import Candidate, FusionContext, FusionRun, LaneInfo

__all__ = ["COMPONENT_OF_KIND", "ModeScorer", "collect"]

_USABLE = (LaneStatus.SUCCESS, LaneStatus.FALLBACK)

COMPONENT_OF_KIND: dict[LaneKind, str] = {
    LaneKind.KEYWORD: "lexical",
    LaneKind.VECTOR: "semantic",
    LaneKind.GRAPH: "graph",
}
"""Lane kind → per-lane native score component name."""


def collect(
    outcomes: Mapping[str, LaneOutcome], ctx: FusionContext
) -> tuple[FusionRun, list[Candidate], dict[str, list[str]], int]:
    """Build the run, one candidate per distinct id, each usable lane's collapsed id list, and the hit count."""
    mode = ctx.mode or ctx.config.mode
    normalise = NORMALISERS.get(mode.value)
    lanes: dict[str, LaneInfo] = {}
    rankings: dict[str, list[str]] = {}
    by_id: dict[str, Candidate] = {}
    hits_seen = 0
    for name in sorted(outcomes):
        out = outcomes[name]
        if out.status not in _USABLE or not out.hits:
            continue
        stage = 0 if ctx.stage_of.get(name, 1) <= 1 else 1
        lanes[name] = LaneInfo(weight=out.weight, kind=out.kind, stage=stage)
        hits_seen += len(out.hits)
        ids: list[str] = []
        seen: set[str] = set()
        for h in out.hits:
            i = h.id
            if i in seen:
                continue
            seen.add(i)
            ids.append(i)
            rank = len(ids)
            c = by_id.get(i)
            if c is None:
                by_id[i] = {
                    "id": i, "hit": h, "ranks": {name: rank}, "native": {name: h.score}, "norm": {},
                    "stage": stage, "best": rank, "merged": [], "scores": {}, "base": 0.0, "total": 0.0,
                }  # fmt: skip
                continue
            c["ranks"][name] = rank
            c["native"][name] = h.score
            if (stage, rank) < (c["stage"], c["best"]):
                c["hit"], c["stage"] = h, stage
            c["best"] = min(c["best"], rank)
        rankings[name] = ids
        if normalise is not None:
            for i, value in zip(ids, normalise([by_id[i]["native"][name] for i in ids]), strict=True):
                by_id[i]["norm"][name] = value
    run = FusionRun(ctx=ctx, mode=mode, lanes=lanes)
    return run, list(by_id.values()), rankings, hits_seen


class ModeScorer:
    """Stage: per-candidate ``rrf``, native lane components, final ranks and the mode's ``base`` in [0, 1]."""

    def __init__(self, rankings: Mapping[str, list[str]]) -> None:
        """Keep the lanes' collapsed id lists (from :func:`collect`)."""
        self.rankings = rankings

    def __call__(self, cands: list[Candidate], run: FusionRun) -> list[Candidate]:
        """Score ``cands`` (after deduplication) in ``run.mode``."""
        k = run.ctx.config.rrf_k
        weights = {name: info.weight for name, info in run.lanes.items()}
        rankings = _aliased(self.rankings, cands)
        # Ranks only move when a merge closed a gap inside a lane; otherwise collect's ranks are already final.
        ranks: dict[str, dict[str, int]] | None = {} if rankings is not self.rankings else None
        rrf = fuse_rrf(rankings, k=k, weights=weights, ranks_out=ranks)
        if run.mode is FusionMode.APPEND_FILL:
            base = _staged_rrf(rankings, run, k)
        elif run.mode is FusionMode.RRF:
            ceiling = rrf_ceiling(weights.values(), k=k)
            base = {i: s / ceiling for i, s in rrf.items()} if ceiling > 0 else dict.fromkeys(rrf, 0.0)
        else:
            base = _score_base(cands, weights, run.ctx.combmnz or run.ctx.config.combmnz)
        kind = {name: comp for name, info in run.lanes.items() if (comp := COMPONENT_OF_KIND.get(info.kind))}
        for c in cands:
            i = c["id"]
            if ranks is not None and (r := ranks.get(i)) is not None:
                c["ranks"] = r
                c["best"] = min(r.values())
            c["base"] = base.get(i, 0.0)
            scores = c["scores"]
            scores["rrf"] = rrf.get(i, 0.0)
            for lane, value in c["native"].items():
                comp = kind.get(lane)
                if comp is not None and value > scores.get(comp, float("-inf")):
                    scores[comp] = value
        return cands


def _aliased(rankings: Mapping[str, list[str]], cands: list[Candidate]) -> Mapping[str, list[str]]:
    alias = {m: c["id"] for c in cands for m in c["merged"]}
    if not alias:
        return rankings
    return {lane: [alias.get(i, i) for i in ids] for lane, ids in rankings.items()}


def _staged_rrf(rankings: Mapping[str, list[str]], run: FusionRun, k: int) -> dict[str, float]:
    base: dict[str, float] = {}
    for stage in (1, 0):  # stage 0 last so an item in both stages keeps its stage-1 score
        lanes = {n: info.weight for n, info in run.lanes.items() if info.stage == stage}
        ceiling = rrf_ceiling(lanes.values(), k=k)
        part = fuse_rrf({n: rankings[n] for n in lanes}, k=k, weights=lanes)
        base.update({i: (s / ceiling if ceiling > 0 else 0.0) for i, s in part.items()})
    return base


def _score_base(cands: list[Candidate], weights: dict[str, float], combmnz: bool) -> dict[str, float]:
    ceiling = sum(max(w, 0.0) for w in weights.values()) * (len(weights) if combmnz else 1)
    if ceiling <= 0:
        return {c["id"]: 0.0 for c in cands}
    return {c["id"]: fuse_scores(c["norm"], weights, combmnz=combmnz) / ceiling for c in cands}
