"""Per-query comparisons in the eval report: the fused run against the best single lane and against the federation.

A mean hides which queries a change lost. For each comparison the artifact's ``comparison`` section holds the
mean difference of nDCG@10, MRR@10 and Recall@100 with a paired bootstrap interval and a randomisation p-value
(:mod:`fabric.eval.stats`), the queries won, lost and tied on nDCG@10, and the ids of the worst losses, so a
regression is visible as queries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fabric.eval.stats import paired_test

__all__ = ["COMPARED_METRICS", "best_lane", "compare_artifacts", "compare_runs", "comparison_lines"]

COMPARED_METRICS = ("ndcg_at_10", "mrr_at_10", "recall_at_100")
_LOSSES_LISTED = 10

PerQuery = Mapping[str, Mapping[str, float]]


def best_lane(lanes: Mapping[str, Mapping[str, float]]) -> str | None:
    """The lane pass with the highest mean nDCG@10 (None without lane passes)."""
    if not lanes:
        return None
    return max(sorted(lanes), key=lambda name: lanes[name].get("ndcg_at_10", 0.0))


def compare_runs(run: PerQuery, other: PerQuery, query_ids: list[str], *, against: str) -> dict[str, Any]:
    """``run`` minus ``other`` over ``query_ids`` (a query missing from a run scores 0)."""
    out: dict[str, Any] = {"against": against}
    for metric in COMPARED_METRICS:
        a = [run.get(q, {}).get(metric, 0.0) for q in query_ids]
        b = [other.get(q, {}).get(metric, 0.0) for q in query_ids]
        out[metric] = paired_test(a, b).to_dict()
    deltas = {q: run.get(q, {}).get("ndcg_at_10", 0.0) - other.get(q, {}).get("ndcg_at_10", 0.0) for q in query_ids}
    worst = sorted((q for q in query_ids if deltas[q] < 0), key=lambda q: (deltas[q], q))[:_LOSSES_LISTED]
    out["worst_losses"] = [{"query_id": q, "ndcg_at_10_delta": round(deltas[q], 6)} for q in worst]
    return out


def compare_artifacts(current: Mapping[str, Any], other: Mapping[str, Any], *, against: str) -> dict[str, Any] | None:
    """``current``'s fused run minus ``other``'s, query by query (their ``per_query`` sections), over ``current``'s
    queries; None when ``other`` holds no per-query figures (an artifact written before they were kept) or is of
    another dataset or split."""
    theirs = other.get("per_query")
    same = all((current.get("dataset") or {}).get(k) == (other.get("dataset") or {}).get(k) for k in ("name", "split"))
    if not isinstance(theirs, Mapping) or not same:
        return None
    ours = current.get("per_query") or {}
    return compare_runs(ours, theirs, sorted(ours), against=against)


def comparison_lines(comparison: Mapping[str, Any] | None) -> list[str]:
    """The report's Markdown for the ``comparison`` section."""
    if not comparison:
        return []
    lines = ["", "## Per-query comparison (fused minus the other run; paired bootstrap 95 % interval)", ""]
    lines += ["| against | metric | mean delta | 95 % interval | p | wins | losses | ties |"]
    lines += ["| --- | --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    for entry in comparison.values():
        for metric in COMPARED_METRICS:
            t = entry[metric]
            lo, hi = t["ci95"]
            lines.append(
                f"| {entry['against']} | {metric} | {t['mean_delta']:+.4f} | [{lo:+.4f}, {hi:+.4f}] | "
                f"{t['p_value']:.4f} | {t['wins']} | {t['losses']} | {t['ties']} |"
            )
    for entry in comparison.values():
        losses = ", ".join(f"{w['query_id']} ({w['ndcg_at_10_delta']:+.3f})" for w in entry["worst_losses"])
        lines.append(f"- worst nDCG@10 losses against {entry['against']}: {losses or 'none'}")
    return lines
