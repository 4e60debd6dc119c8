"""Offline fusion tuning: fit lane weights, the RRF k and the fusion mode on cached per-lane rankings.

Each lane's hits are fetched once per query (the fused pass keeps them); every candidate configuration is then
fused offline with the project's own pure functions (:func:`fusion.rrf.fuse_rrf`, :mod:`fusion.score`) and
scored by nDCG@10, so hundreds of configurations cost seconds. Offline fusion ranks by the fusion score alone
(no boosts or ranking factors), so it compares configurations with each other, not with the engine's figure.

Overfitting guard: queries are split in two halves by a hash of their id; the search sees only the fit half
and the report gives both halves' scores for the default and the chosen configuration.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from fabric.eval.metrics import dedupe, query_metrics
from fabric.eval.runner import LaneHit
from fusion.rrf import fuse_rrf
from fusion.score import NORMALISERS, fuse_scores

__all__ = [
    "K_GRID",
    "MODES",
    "WEIGHT_GRID",
    "FusionChoice",
    "TuneReport",
    "fuse_offline",
    "score_choice",
    "split_queries",
    "to_toml",
    "tune",
]

MODES = ("rrf", "score_minmax", "score_dbsf")
"""Fusion modes searched."""
K_GRID = (10, 20, 40, 60, 100)
"""RRF constants searched (rrf mode only)."""
WEIGHT_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
"""Lane weights searched, one lane at a time (coordinate ascent)."""

Rankings = Mapping[str, Mapping[str, Sequence[LaneHit]]]
"""Query id → lane → hits, best first."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FusionChoice:
    """One fusion configuration."""

    mode: str = "rrf"
    k: int = 60
    weights: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        """JSON shape."""
        return {"mode": self.mode, "rrf_k": self.k, "weights": dict(self.weights)}


@dataclass(frozen=True, slots=True, kw_only=True)
class TuneReport:
    """Default vs chosen configuration on the fit and held-out halves."""

    default: FusionChoice
    best: FusionChoice
    scores: Mapping[str, Mapping[str, float]]
    """``default`` / ``best`` → ``fit`` / ``heldout`` / ``all`` → nDCG@10."""
    by_mode: Mapping[str, Mapping[str, object]]
    """Best configuration found per mode → its nDCG@10 (fit and held-out)."""
    untuned: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Each mode with equal weights and k = 60 → nDCG@10 (fit, held-out, all): the modes compared as shipped."""
    fit_queries: int
    heldout_queries: int
    evaluated: int
    """Configurations scored."""

    def to_dict(self) -> dict[str, object]:
        """JSON shape of the report."""
        return {
            "default": self.default.to_dict(),
            "best": self.best.to_dict(),
            "ndcg_at_10": {k: dict(v) for k, v in self.scores.items()},
            "by_mode": {k: dict(v) for k, v in self.by_mode.items()},
            "untuned": {k: dict(v) for k, v in self.untuned.items()},
            "fit_queries": self.fit_queries,
            "heldout_queries": self.heldout_queries,
            "configurations_evaluated": self.evaluated,
        }


def split_queries(query_ids: Sequence[str]) -> tuple[list[str], list[str]]:
    """Deterministic halves by the parity of a hash of each id: (fit, held-out)."""
    fit: list[str] = []
    held: list[str] = []
    for qid in query_ids:
        (fit if hashlib.sha1(qid.encode()).digest()[0] % 2 == 0 else held).append(qid)
    return fit, held


def _normalised(lanes: Mapping[str, Sequence[LaneHit]], mode: str) -> dict[str, dict[str, float]]:
    """Hit id → lane → the lane's normalised score (a lane's repeated hit ids count once, first kept)."""
    normalise = NORMALISERS[mode]
    norm: dict[str, dict[str, float]] = {}
    for lane, hits in lanes.items():
        first: dict[str, float] = {}
        for hit_id, _, score in hits:
            first.setdefault(hit_id, score)
        for hit_id, value in zip(first, normalise(list(first.values())), strict=True):
            norm.setdefault(hit_id, {})[lane] = value
    return norm


def fuse_offline(
    lanes: Mapping[str, Sequence[LaneHit]],
    choice: FusionChoice,
    *,
    cache: dict[tuple[int, str], dict[str, dict[str, float]]] | None = None,
) -> list[str]:
    """Fuse one query's lane hits with ``choice`` and return document ids, best first, deduplicated.

    Args:
        lanes: lane → hits, best first.
        choice: fusion mode, k and weights.
        cache: reused across calls on the same ``lanes`` object to normalise each lane once per mode.
    """
    doc_of = {hit_id: doc_id for hits in lanes.values() for hit_id, doc_id, _ in hits}
    weights = {lane: choice.weights.get(lane, 1.0) for lane in lanes}
    if choice.mode == "rrf":
        scores = fuse_rrf({lane: [h[0] for h in hits] for lane, hits in lanes.items()}, k=choice.k, weights=weights)
    else:
        key = (id(lanes), choice.mode)
        norm = cache.get(key) if cache is not None else None
        if norm is None:
            norm = _normalised(lanes, choice.mode)
            if cache is not None:
                cache[key] = norm
        scores = {hit_id: fuse_scores(parts, weights) for hit_id, parts in norm.items()}
    order = sorted(scores, key=lambda i: (-scores[i], i))
    return dedupe([doc_of[i] for i in order])


def score_choice(
    rankings: Rankings,
    qrels: Mapping[str, Mapping[str, int]],
    query_ids: Sequence[str],
    choice: FusionChoice,
    *,
    cache: dict[tuple[int, str], dict[str, dict[str, float]]] | None = None,
) -> float:
    """Mean nDCG@10 of ``choice`` over ``query_ids`` (``cache``: see :func:`fuse_offline`)."""
    if not query_ids:
        return 0.0
    empty: Mapping[str, Sequence[LaneHit]] = {}
    total = 0.0
    for qid in query_ids:
        ranking = fuse_offline(rankings.get(qid, empty), choice, cache=cache)
        total += query_metrics(ranking, qrels[qid])["ndcg_at_10"]
    return total / len(query_ids)


def tune(
    rankings: Rankings,
    qrels: Mapping[str, Mapping[str, int]],
    query_ids: Sequence[str],
    default: FusionChoice,
    *,
    modes: Sequence[str] = MODES,
    rounds: int = 2,
) -> TuneReport:
    """Search modes, k and lane weights on the fit half; report default and best on both halves.

    Args:
        rankings: per-query lane hits (from the fused pass).
        qrels: judgements.
        query_ids: judged queries to use.
        default: the configured fusion (the reference).
        modes: fusion modes to search.
        rounds: coordinate-ascent sweeps over the lanes.
    """
    fit, held = split_queries(query_ids)
    lanes = sorted({lane for per in rankings.values() for lane in per})
    evaluated = 0
    cache: dict[tuple[str, int, tuple[float, ...]], float] = {}
    norm_cache: dict[tuple[int, str], dict[str, dict[str, float]]] = {}

    def objective(c: FusionChoice) -> float:
        nonlocal evaluated
        key = (c.mode, c.k, tuple(c.weights.get(lane, 1.0) for lane in lanes))
        if key not in cache:
            evaluated += 1
            cache[key] = score_choice(rankings, qrels, fit, c, cache=norm_cache)
        return cache[key]

    best_per_mode: dict[str, tuple[float, FusionChoice]] = {}
    for mode in modes:
        start = FusionChoice(mode=mode, k=default.k, weights=dict.fromkeys(lanes, 1.0))
        best, best_s = start, objective(start)
        for _ in range(rounds):
            if mode == "rrf":
                for k in K_GRID:
                    cand = replace(best, k=k)
                    if (s := objective(cand)) > best_s:
                        best, best_s = cand, s
            for lane in lanes:
                for w in WEIGHT_GRID:
                    cand = replace(best, weights={**best.weights, lane: w})
                    if any(v > 0 for v in cand.weights.values()) and (s := objective(cand)) > best_s:
                        best, best_s = cand, s
        best_per_mode[mode] = (best_s, best)
    best_s, best = max(best_per_mode.values(), key=lambda t: t[0])
    default = replace(default, weights={lane: default.weights.get(lane, 1.0) for lane in lanes})

    def both(c: FusionChoice) -> dict[str, float]:
        return {
            "fit": round(score_choice(rankings, qrels, fit, c, cache=norm_cache), 6),
            "heldout": round(score_choice(rankings, qrels, held, c, cache=norm_cache), 6),
            "all": round(score_choice(rankings, qrels, list(query_ids), c, cache=norm_cache), 6),
        }

    return TuneReport(
        default=default,
        best=best,
        scores={"default": both(default), "best": both(best)},
        by_mode={mode: {**both(c), "config": c.to_dict()} for mode, (_, c) in best_per_mode.items()},
        untuned={mode: both(FusionChoice(mode=mode, k=60, weights=dict.fromkeys(lanes, 1.0))) for mode in modes},
        fit_queries=len(fit),
        heldout_queries=len(held),
        evaluated=evaluated,
    )


def to_toml(choice: FusionChoice, report: TuneReport) -> str:
    """A user config file (``--config`` / ``FABRIC_CONFIG``) setting the chosen fusion mode, k and weights."""
    s = report.scores
    lines = [
        "# Written by `fabric tune`: fusion fitted on half the judged queries, checked on the other half.",
        f"# nDCG@10 default {s['default']['fit']:.4f} fit / {s['default']['heldout']:.4f} held-out; "
        f"chosen {s['best']['fit']:.4f} fit / {s['best']['heldout']:.4f} held-out (offline fusion, no boosts).",
        "schema = 1",
        "",
        "[fusion]",
        f'mode = "{choice.mode}"',
        f"rrf_k = {choice.k}",
    ]
    for lane, weight in sorted(choice.weights.items()):
        lines += ["", f"[lanes.{lane}]", f"weight = {weight}"]
    return "\n".join(lines) + "\n"
