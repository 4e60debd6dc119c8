"""Offline replay of the heuristic cascade over label files, for tuning its thresholds on a dev split.

A label row holds the query text, the probe's signals and each strategy's nDCG@10 (:mod:`tools.router.labels`),
so the cascade's decision and the score it would reach are known without running the engine again. The grid
reports, per ``(skew_max, max_score_min)``, the mean routed nDCG@10 and how many queries each strategy took
(Graph costs one lane more than Dense). Seed 004 §1: the thresholds "will be tuned on the Dev Set"; ``fabric
router train`` chooses them on the fit split (the label rows outside the dev split) and replays the choice on the
held-out dev split.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from fabric.core.strategies import STRATEGY_ORDER
from fabric.query.router.heuristic import decide
from fabric.query.router.signals import ProbeSignals
from fabric.settings.router import RouterConfig

__all__ = ["MAX_SCORE_GRID", "SKEW_GRID", "TOLERANCE", "replay_heuristic", "threshold_grid"]

SKEW_GRID: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)
MAX_SCORE_GRID: tuple[float, ...] = (0.5, 0.6, 0.65, 0.7, 0.8, 1.01)
"""1.01 is above any cosine: rule 3 never fires."""
TOLERANCE = 0.001
"""Routed nDCG@10 within this of the best counts as a tie, broken by fewer Graph routes (the simplicity bias of
seed 004 §5, over a whole split instead of one query)."""


def replay_heuristic(rows: Sequence[Mapping[str, Any]], cfg: RouterConfig) -> dict[str, Any]:
    """Mean nDCG@10 the cascade reaches on ``rows`` and the strategies it picks."""
    total = 0.0
    picks = dict.fromkeys((s.value for s in STRATEGY_ORDER), 0)
    for row in rows:
        strategy = decide(str(row["text"]), ProbeSignals.from_mapping(row["signals"]), cfg).strategy
        total += float(row["scores"][strategy.value])
        picks[strategy.value] += 1
    return {"ndcg_at_10": round(total / max(1, len(rows)), 4), "strategies": picks}


def threshold_grid(
    rows: Sequence[Mapping[str, Any]],
    cfg: RouterConfig,
    skews: Sequence[float] = SKEW_GRID,
    maxes: Sequence[float] = MAX_SCORE_GRID,
    *,
    tolerance: float = TOLERANCE,
) -> list[dict[str, Any]]:
    """Every threshold pair, best first: among the pairs within ``tolerance`` of the best routed nDCG@10, fewer
    Graph routes first (a Graph route costs a lane and waits for the probe), then the score, then the seed's
    values; the other pairs after them, by score."""
    out = []
    for skew in skews:
        for top in maxes:
            trial = dataclasses.replace(cfg, skew_max=skew, max_score_min=top)
            out.append({"skew_max": skew, "max_score_min": top, **replay_heuristic(rows, trial)})
    best = max((r["ndcg_at_10"] for r in out), default=0.0)
    seed = (cfg.skew_max, cfg.max_score_min)

    def rank(r: dict[str, Any]) -> tuple[bool, int, float, bool]:
        near = r["ndcg_at_10"] >= best - tolerance
        return (
            not near,
            r["strategies"]["graph"] if near else 0,
            -r["ndcg_at_10"],
            (r["skew_max"], r["max_score_min"]) != seed,
        )

    out.sort(key=rank)
    return out
