"""Ranking metrics for the evaluation harness, per query and averaged (trec_eval / ranx semantics).

Definitions, for one query with graded judgements ``qrels`` (doc id → relevance; relevance > 0 is relevant)
and a ranking (doc ids, best first, already deduplicated):

- ``hit@k``: 1 when a relevant doc is in the top k, else 0;
- ``precision@k``: relevant docs in the top k divided by k;
- ``recall@k``: relevant docs in the top k divided by all relevant docs of the query;
- ``mrr@k``: 1 / rank of the first relevant doc in the top k, else 0;
- ``ndcg@k``: DCG / ideal DCG with linear gain (the relevance grade) and the ``log2(rank + 1)`` discount,
  as ``trec_eval``'s ``ndcg_cut`` and ranx's ``ndcg`` (not the ``2^rel - 1`` "Burges" variant).

Averages are over the queries of the qrels: a query with no ranking scores 0. ``tests/fabric/eval`` proves the
figures equal ranx's on fixtures; ranx itself (slow to import, numba) stays out of the runtime path.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from fabric.settings.sections import METRIC_KEYS

__all__ = ["METRIC_KEYS", "average", "dedupe", "query_metrics"]


def dedupe(ids: Sequence[str]) -> list[str]:
    """Drop repeated ids (and empty ones), keeping the first occurrence: chunk hits → document ranking."""
    seen: set[str] = set()
    out: list[str] = []
    for doc_id in ids:
        if doc_id and doc_id not in seen:
            seen.add(doc_id)
            out.append(doc_id)
    return out


def _dcg(gains: Sequence[float]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def _ndcg(ranking: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    ideal = _dcg(sorted((float(r) for r in qrels.values() if r > 0), reverse=True)[:k])
    if ideal == 0.0:
        return 0.0
    return _dcg([float(max(qrels.get(d, 0), 0)) for d in ranking[:k]]) / ideal


def query_metrics(ranking: Sequence[str], qrels: Mapping[str, int]) -> dict[str, float]:
    """Every metric of :data:`METRIC_KEYS` for one query.

    Args:
        ranking: document ids, best first; deduplicated here (first occurrence kept).
        qrels: document id → graded relevance; grades <= 0 are not relevant.

    Returns:
        metric key → value in [0, 1].
    """
    ranked = dedupe(ranking)
    relevant = {d for d, r in qrels.items() if r > 0}
    n_rel = len(relevant)
    flags = [d in relevant for d in ranked]
    first = next((i + 1 for i, f in enumerate(flags) if f), None)

    def found(k: int) -> int:
        return sum(flags[:k])

    def recall(k: int) -> float:
        return found(k) / n_rel if n_rel else 0.0

    return {
        "ndcg_at_10": _ndcg(ranked, qrels, 10),
        "mrr_at_10": 1.0 / first if first is not None and first <= 10 else 0.0,
        "recall_at_10": recall(10),
        "recall_at_20": recall(20),
        "recall_at_100": recall(100),
        "precision_at_10": found(10) / 10.0,
        "hit_at_1": 1.0 if found(1) else 0.0,
        "hit_at_5": 1.0 if found(5) else 0.0,
    }


def average(per_query: Mapping[str, Mapping[str, float]], query_ids: Sequence[str]) -> dict[str, float]:
    """Mean of each metric over ``query_ids`` (a query missing from ``per_query`` counts as all zeros)."""
    if not query_ids:
        return dict.fromkeys(METRIC_KEYS, 0.0)
    return {key: sum(per_query.get(q, {}).get(key, 0.0) for q in query_ids) / len(query_ids) for key in METRIC_KEYS}
