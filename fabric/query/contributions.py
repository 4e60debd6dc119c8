"""Each lane's and each ranking factor's contribution to ``score_total``, on the total's own scale (the API contract).

The API contract shows ``score_lexical``, ``score_semantic`` and ``score_graph`` beside ``score_total`` as parts of it.
The ranker (:mod:`fusion.rank`) computes::

    score_total = (w_rrf · fused + Σ_{f in F} w_f · f) / (w_rrf + Σ_{f in F} w_f)

where ``fused`` is the fusion mode's base score and ``F`` the factors that vary over the candidates. This
module splits that sum back into parts that add up to ``score_total`` (to rounding):

- the base part ``w_rrf · fused / norm`` is shared between the lanes that returned the item, in proportion to
  each lane's weighted term: ``w / (k + rank)`` in the rank modes (``rrf``, ``append_fill``), ``w · norm(score)``
  in the score modes (the lane's scores normalised as fusion does); lane parts are summed per lane kind
  (``keyword`` → ``lexical``, ``vector`` → ``semantic``, ``graph`` → ``graph``, other kinds under their name);
- each factor in ``F`` adds ``w_f · f / norm`` under its own name.

With ``[fusion] factor_scaling = "literal"`` (:mod:`fusion.literal`) the total is the plain sum
``w_rrf · rrf + Σ w_f · f``: each lane's part is ``w_rrf · w / (k + rank)`` and each factor's ``w_f · f``.

It reads only what fusion returns (the page's items and the lane outcomes): ``F`` is the subset of factors whose
weighted mean reproduces the page's totals (the ranker drops constant factors, so it is not a setting). The raw
lane scores (BM25, cosine, graph score) stay in ``FusedItem.scores`` under ``lexical`` / ``semantic`` / ``graph``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from fabric.core.models import FusedItem, FusionMode, LaneKind, LaneOutcome
from fabric.settings import FusionConfig
from fusion.score import NORMALISERS

__all__ = ["COMPONENTS", "FACTOR_NAMES", "contributions", "informative_factors"]

COMPONENTS: Mapping[LaneKind, str] = {
    LaneKind.KEYWORD: "lexical",
    LaneKind.VECTOR: "semantic",
    LaneKind.GRAPH: "graph",
}
"""Lane kind → contribution name (other kinds use their own value, e.g. ``web``)."""

FACTOR_NAMES = ("domain_diversity", "recency", "authority", "quality")
"""The ranking factors besides the fused base score (``[fusion.factors]``)."""

_TOLERANCE = 1e-9


def informative_factors(items: Sequence[FusedItem], config: FusionConfig) -> tuple[str, ...]:
    """The factors the ranker used for these items: the subset whose weighted mean gives their totals.

    Subsets are tried from the largest down; the first that reproduces every total within 1e-9 wins (the
    empty subset means ``score_total == fused``). When none does (not expected), the closest one is returned.
    A subset is checked against the first item before the others: most fail there, so a page costs about one
    item per subset instead of all of them (0.30 ms per SciFact query before).
    """
    w = config.factors
    positive = [f for f in FACTOR_NAMES if getattr(w, f) > 0.0]
    subsets = [s for size in range(len(positive), -1, -1) for s in itertools.combinations(positive, size)]
    for subset in subsets:
        if _error(items[:1], subset, config) <= _TOLERANCE and _error(items, subset, config) <= _TOLERANCE:
            return subset
    best: tuple[float, tuple[str, ...]] = (float("inf"), ())
    for subset in subsets:
        err = _error(items, subset, config)
        if err < best[0]:
            best = (err, subset)
    return best[1]


def _error(items: Sequence[FusedItem], subset: tuple[str, ...], config: FusionConfig) -> float:
    """The largest gap between an item's ``score_total`` and the weighted mean of its base score and ``subset``."""
    w = config.factors
    norm = max(0.0, w.rrf) + sum(getattr(w, f) for f in subset)
    weights = [(getattr(w, f), f) for f in subset]
    err = 0.0
    for it in items:
        if not subset or norm <= 0.0:
            predicted = it.scores.get("fused", it.score_total)
        else:
            part = sum(wf * it.scores.get(f, 0.0) for wf, f in weights)
            predicted = (max(0.0, w.rrf) * it.scores.get("fused", 0.0) + part) / norm
        err = max(err, abs(predicted - it.score_total))
    return err


def _lane_norms(lanes: Mapping[str, LaneOutcome], mode: FusionMode) -> dict[str, dict[str, float]]:
    """Score modes: lane → {item id: normalised score}, each lane's repeats collapsed (first occurrence)."""
    normalise = NORMALISERS.get(mode.value)
    out: dict[str, dict[str, float]] = {}
    if normalise is None:
        return out
    for name, lane in lanes.items():
        first: dict[str, float] = {}
        for h in lane.hits:
            first.setdefault(h.id, h.score)
        out[name] = dict(zip(first, normalise(list(first.values())), strict=True))
    return out


def contributions(
    items: Sequence[FusedItem],
    lanes: Mapping[str, LaneOutcome],
    config: FusionConfig,
    mode: FusionMode,
) -> dict[str, dict[str, float]]:
    """Item id → contribution name → its part of the item's ``score_total`` (parts add up to the total)."""
    if not items:
        return {}
    if config.factor_scaling == "literal" and _literal_error(items, config) <= _TOLERANCE:
        return _literal_parts(items, lanes, config)
    used = informative_factors(items, config)
    w = config.factors
    w_base = max(0.0, w.rrf)
    norm = w_base + sum(getattr(w, f) for f in used)
    alpha = w_base / norm if used and norm > 0.0 else 1.0
    norms = _lane_norms(lanes, mode)
    out: dict[str, dict[str, float]] = {}
    for it in items:
        terms: dict[str, float] = {}
        for name, rank in it.ranks.items():
            lane = lanes.get(name)
            if lane is None:
                continue
            comp = COMPONENTS.get(lane.kind, lane.kind.value)
            if norms:
                by_id = norms.get(name, {})
                term = lane.weight * max(by_id.get(i, 0.0) for i in (it.id, *it.merged_ids))
            else:
                term = lane.weight / (config.rrf_k + rank)
            terms[comp] = terms.get(comp, 0.0) + term
        base_part = alpha * it.scores.get("fused", it.score_total if not used else 0.0)
        total_terms = sum(terms.values())
        parts = {c: base_part * t / total_terms for c, t in terms.items()} if total_terms > 0 else {}
        for f in used:
            parts[f] = getattr(w, f) * it.scores.get(f, 0.0) / norm
        out[it.id] = parts
    return out


def _literal_error(items: Sequence[FusedItem], config: FusionConfig) -> float:
    """The largest gap between an item's ``score_total`` and the literal sum ``w_rrf · rrf + Σ w_f · f``
    (:mod:`fusion.literal`; a staged fusion ordered by its fused score alone does not fit it)."""
    w = config.factors
    err = 0.0
    for it in items:
        total = max(0.0, w.rrf) * it.scores.get("rrf", 0.0)
        total += sum(max(0.0, getattr(w, f)) * it.scores.get(f, 0.0) for f in FACTOR_NAMES)
        err = max(err, abs(total - it.score_total))
    return err


def _literal_parts(
    items: Sequence[FusedItem], lanes: Mapping[str, LaneOutcome], config: FusionConfig
) -> dict[str, dict[str, float]]:
    """The literal sum split: ``w_rrf · w_lane / (k + rank)`` per lane (summed per kind), ``w_f · f`` per factor."""
    w = config.factors
    w_rrf = max(0.0, w.rrf)
    out: dict[str, dict[str, float]] = {}
    for it in items:
        parts: dict[str, float] = {}
        for name, rank in it.ranks.items():
            lane = lanes.get(name)
            if lane is not None:
                comp = COMPONENTS.get(lane.kind, lane.kind.value)
                parts[comp] = parts.get(comp, 0.0) + w_rrf * lane.weight / (config.rrf_k + rank)
        for f in FACTOR_NAMES:
            parts[f] = max(0.0, getattr(w, f)) * it.scores.get(f, 0.0)
        out[it.id] = parts
    return out
