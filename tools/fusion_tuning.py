"""Offline fusion tuning: fit lane weights, the RRF k and the fusion mode on cached per-lane rankings.

Several datasets can be fitted at once (:class:`TuneSet`): a configuration's objective is then the worst (or
the mean) over the datasets of its nDCG@10 gain over a reference, plain RRF k = 60 with equal weights, so a
choice that helps one collection by hurting another scores by the one it hurts.

Each lane's hits are fetched once per query (the fused pass keeps them); every candidate configuration is then
fused offline with the project's own pure functions (:func:`fusion.rrf.fuse_rrf`, :mod:`fusion.score`) and
scored by nDCG@10, so hundreds of configurations cost seconds. Offline fusion ranks by the fusion score alone
(no boosts or ranking factors), so it compares configurations with each other, not with the engine's figure.

Overfitting guard: queries are split in two halves by a hash of their id; the search sees only the fit half
and the report gives both halves' scores for the default and the chosen configuration.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from fabric.eval.metrics import dedupe, query_metrics
from fabric.eval.runner import LaneHit
from fusion.rrf import fuse_rrf
from fusion.score import NORMALISERS, fuse_scores

__all__ = [
    "K_GRID",
    "MODES",
    "OBJECTIVES",
    "REFERENCE",
    "WEIGHT_GRID",
    "FusionChoice",
    "TuneReport",
    "TuneSet",
    "fuse_offline",
    "score_choice",
    "split_queries",
    "to_toml",
    "tune",
]

MODES = ("rrf", "score_minmax", "score_dbsf", "score_zscore")
"""Fusion modes searched."""
K_GRID = (10, 20, 40, 60, 100)
"""RRF constants searched (rrf mode only)."""
WEIGHT_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
"""Lane weights searched, one lane at a time (coordinate ascent)."""
OBJECTIVES = ("worst", "mean")
"""How per-dataset gains combine into one objective."""

Rankings = Mapping[str, Mapping[str, Sequence[LaneHit]]]
"""Query id → lane → hits, best first."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FusionChoice:
    """One fusion configuration."""

    mode: str = "rrf"
    k: int = 60
    weights: Mapping[str, float] = field(default_factory=dict)
    combmnz: bool = False
    """Score modes: multiply by the number of lanes that returned the item."""
    confidence: bool = True
    """Each query's lane weights times the engine's lane confidence (:attr:`TuneSet.factors`), as the engine fuses."""

    def to_dict(self) -> dict[str, object]:
        """JSON shape."""
        return {
            "mode": self.mode,
            "rrf_k": self.k,
            "combmnz": self.combmnz,
            "weights": dict(self.weights),
            "confidence": self.confidence,
        }


REFERENCE = FusionChoice(mode="rrf", k=60, confidence=False)
"""What gains are measured against: plain RRF, k = 60, every lane weight 1 (no lane confidence)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TuneSet:
    """One dataset's cached lane rankings and judgements."""

    name: str
    rankings: Mapping[str, Mapping[str, Sequence[LaneHit]]]
    """Query id → lane → hits, best first."""
    qrels: Mapping[str, Mapping[str, int]]
    query_ids: Sequence[str]
    factors: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Query id → lane → the engine's confidence factor of that lane's weight for the query (absent: 1)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TuneReport:
    """Default, reference and chosen configuration on each dataset's fit and held-out halves."""

    default: FusionChoice
    best: FusionChoice
    objective: str
    scores: Mapping[str, Mapping[str, Mapping[str, float]]]
    """Dataset → ``default`` / ``best`` / ``reference`` → ``fit`` / ``heldout`` / ``all`` → nDCG@10."""
    by_mode: Mapping[str, Mapping[str, object]]
    """Best configuration found per mode → its config and per-dataset nDCG@10 (fit, held-out, all)."""
    untuned: Mapping[str, Mapping[str, Mapping[str, float]]] = field(default_factory=dict)
    """Each mode with equal weights and k = 60 → dataset → nDCG@10 (fit, held-out, all)."""
    fit_queries: Mapping[str, int]
    heldout_queries: Mapping[str, int]
    evaluated: int
    """Configurations scored."""

    def to_dict(self) -> dict[str, object]:
        """JSON shape of the report."""
        return {
            "objective": self.objective,
            "reference": REFERENCE.to_dict(),
            "default": self.default.to_dict(),
            "best": self.best.to_dict(),
            "ndcg_at_10": {name: {c: dict(v) for c, v in per.items()} for name, per in self.scores.items()},
            "by_mode": {k: dict(v) for k, v in self.by_mode.items()},
            "untuned": {k: {n: dict(v) for n, v in per.items()} for k, per in self.untuned.items()},
            "fit_queries": dict(self.fit_queries),
            "heldout_queries": dict(self.heldout_queries),
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
    factors: Mapping[str, float] | None = None,
) -> list[str]:
    """Fuse one query's lane hits with ``choice`` and return document ids, best first, deduplicated.

    Args:
        lanes: lane → hits, best first.
        choice: fusion mode, k and weights.
        cache: reused across calls on the same ``lanes`` object to normalise each lane once per mode.
        factors: lane → the factor the engine applied to its weight for this query (lane confidence; absent: 1).
    """
    doc_of = {hit_id: doc_id for hits in lanes.values() for hit_id, doc_id, _ in hits}
    factor = (factors or {}) if choice.confidence else {}
    weights = {lane: choice.weights.get(lane, 1.0) * factor.get(lane, 1.0) for lane in lanes}
    if choice.mode == "rrf":
        scores = fuse_rrf({lane: [h[0] for h in hits] for lane, hits in lanes.items()}, k=choice.k, weights=weights)
    else:
        key = (id(lanes), choice.mode)
        norm = cache.get(key) if cache is not None else None
        if norm is None:
            norm = _normalised(lanes, choice.mode)
            if cache is not None:
                cache[key] = norm
        mnz = choice.combmnz
        scores = {hit_id: fuse_scores(parts, weights, combmnz=mnz) for hit_id, parts in norm.items()}
    order = sorted(scores, key=lambda i: (-scores[i], i))
    return dedupe([doc_of[i] for i in order])


def score_choice(
    rankings: Rankings,
    qrels: Mapping[str, Mapping[str, int]],
    query_ids: Sequence[str],
    choice: FusionChoice,
    *,
    cache: dict[tuple[int, str], dict[str, dict[str, float]]] | None = None,
    factors: Mapping[str, Mapping[str, float]] | None = None,
) -> float:
    """Mean nDCG@10 of ``choice`` over ``query_ids`` (``cache``, ``factors`` per query: see :func:`fuse_offline`)."""
    if not query_ids:
        return 0.0
    empty: Mapping[str, Sequence[LaneHit]] = {}
    per_query = factors or {}
    total = 0.0
    for qid in query_ids:
        ranking = fuse_offline(rankings.get(qid, empty), choice, cache=cache, factors=per_query.get(qid))
        total += query_metrics(ranking, qrels[qid])["ndcg_at_10"]
    return total / len(query_ids)


def _candidates(best: FusionChoice, lanes: Sequence[str]) -> list[FusionChoice]:
    """One coordinate-ascent sweep's candidates around ``best``: k (rrf), CombMNZ (score modes), each weight."""
    out: list[FusionChoice] = []
    if best.mode == "rrf":
        out += [replace(best, k=k) for k in K_GRID]
    else:
        out.append(replace(best, combmnz=not best.combmnz))
    for lane in lanes:
        out += [replace(best, weights={**best.weights, lane: w}) for w in WEIGHT_GRID]
    return [c for c in out if any(v > 0 for v in c.weights.values())]


def _ascend(
    value: Callable[[FusionChoice], float], mode: str, k: int, lanes: Sequence[str], rounds: int
) -> tuple[float, FusionChoice]:
    """Coordinate ascent of one fusion mode from equal weights: the best value and configuration found."""
    best = FusionChoice(mode=mode, k=k, weights=dict.fromkeys(lanes, 1.0))
    best_v = value(best)
    for _ in range(rounds):
        for cand in _candidates(best, lanes):
            if (v := value(cand)) > best_v:
                best, best_v = cand, v
    return best_v, best


def _on_both_halves(
    c: FusionChoice,
    sets: Sequence[TuneSet],
    halves: Mapping[str, tuple[list[str], list[str]]],
    norm_cache: dict[tuple[int, str], dict[str, dict[str, float]]],
) -> dict[str, dict[str, float]]:
    """Dataset → nDCG of ``c`` on its fit half, held-out half and all queries."""
    out = {}
    for ts in sets:
        fit, held = halves[ts.name]
        out[ts.name] = {
            split: round(score_choice(ts.rankings, ts.qrels, ids, c, cache=norm_cache, factors=ts.factors), 6)
            for split, ids in (("fit", fit), ("heldout", held), ("all", list(ts.query_ids)))
        }
    return out


def tune(
    sets: Sequence[TuneSet],
    default: FusionChoice,
    *,
    modes: Sequence[str] = MODES,
    rounds: int = 2,
    objective: str = "worst",
) -> TuneReport:
    """Search modes, k, CombMNZ and lane weights on the fit halves; report every configuration on both halves.

    Args:
        sets: per-dataset lane hits (from the fused pass) and judgements.
        default: the configured fusion.
        modes: fusion modes to search.
        rounds: coordinate-ascent sweeps.
        objective: ``worst`` (the smallest) or ``mean`` of the per-dataset fit-half gains over :data:`REFERENCE`.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    halves = {ts.name: split_queries(ts.query_ids) for ts in sets}
    lanes = sorted({lane for ts in sets for per in ts.rankings.values() for lane in per})
    norm_cache: dict[tuple[int, str], dict[str, dict[str, float]]] = {}
    cache: dict[tuple[object, ...], float] = {}

    def fit_score(c: FusionChoice, ts: TuneSet) -> float:
        return score_choice(ts.rankings, ts.qrels, halves[ts.name][0], c, cache=norm_cache, factors=ts.factors)

    reference = replace(REFERENCE, weights=dict.fromkeys(lanes, 1.0))
    base = {ts.name: fit_score(reference, ts) for ts in sets}

    def value(c: FusionChoice) -> float:
        key = (c.mode, c.k, c.combmnz, tuple(c.weights.get(lane, 1.0) for lane in lanes))
        if key not in cache:
            gains = [fit_score(c, ts) - base[ts.name] for ts in sets]
            cache[key] = min(gains) if objective == "worst" else sum(gains) / len(gains)
        return cache[key]

    best_per_mode = {mode: _ascend(value, mode, default.k, lanes, rounds) for mode in modes}
    chosen = max(best_per_mode.values(), key=lambda t: t[0])[1]
    default = replace(default, weights={lane: default.weights.get(lane, 1.0) for lane in lanes})

    def both(c: FusionChoice) -> dict[str, dict[str, float]]:
        return _on_both_halves(c, sets, halves, norm_cache)

    per = {"default": both(default), "best": both(chosen), "reference": both(reference)}
    return TuneReport(
        default=default,
        best=chosen,
        objective=objective,
        scores={ts.name: {label: per[label][ts.name] for label in per} for ts in sets},
        by_mode={mode: {"config": c.to_dict(), **both(c)} for mode, (_, c) in best_per_mode.items()},
        untuned={mode: both(FusionChoice(mode=mode, k=60, weights=dict.fromkeys(lanes, 1.0))) for mode in modes},
        fit_queries={name: len(h[0]) for name, h in halves.items()},
        heldout_queries={name: len(h[1]) for name, h in halves.items()},
        evaluated=len(cache),
    )


def to_toml(choice: FusionChoice, report: TuneReport) -> str:
    """A user config file (``--config`` / ``FABRIC_CONFIG``) setting the chosen fusion mode, k, CombMNZ and weights."""
    lines = [
        "# Written by `fabric tune`: fusion fitted on half the judged queries of each dataset, checked on the other"
        f" half (objective: {report.objective} gain over plain RRF k=60; offline fusion, no boosts).",
    ]
    for name, per in report.scores.items():
        d, b = per["default"], per["best"]
        lines.append(
            f"# {name} nDCG@10: default {d['fit']:.4f} fit / {d['heldout']:.4f} held-out; "
            f"chosen {b['fit']:.4f} fit / {b['heldout']:.4f} held-out"
        )
    lines += [
        "schema = 1",
        "",
        "[fusion]",
        f'mode = "{choice.mode}"',
        f"rrf_k = {choice.k}",
        f"combmnz = {'true' if choice.combmnz else 'false'}",
    ]
    for lane, weight in sorted(choice.weights.items()):
        lines += ["", f"[lanes.{lane}]", f"weight = {weight}"]
    return "\n".join(lines) + "\n"
