"""Hint-rate (the docs-memory policy): how often a follow-up keyword hint is what finds the target.

A query of the project's own set may carry a hint (``metadata.hint`` in ``queries.jsonl``): the keyword a user
would add when the first answer misses, e.g. ``"qdrant"`` after ``"two programs fighting over one on-disk
similarity database"``. The eval runs those queries a second time as ``"<text> <hint>"`` and reports, over the
hinted queries:

- ``hint_rate``: the share whose target is **missed at Hit@5 without the hint and found at Hit@5 with it**
  (the fraction of queries that need a hint, the docs-memory policy's third metric; lower is better);
- ``hit_at_1`` / ``hit_at_5`` without the hint and ``hit_at_5_hinted`` with it;
- the ids rescued by the hint and those missed even with it.

A target is any document judged relevant (grade > 0), as for ``hit_at_k`` in :mod:`fabric.eval.metrics`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from fabric.eval.dataset import Dataset
from fabric.eval.runner import PassResult, SearchEngine, run_pass

__all__ = ["hint_report", "hinted_dataset", "ranked", "run_hinted"]


def hinted_dataset(dataset: Dataset) -> Dataset | None:
    """The dataset's hinted queries with ``"<text> <hint>"`` as their text, or None when no query has a hint."""
    queries = tuple(dataclasses.replace(q, text=f"{q.text} {q.hint}") for q in dataset.queries if q.hint)
    if not queries:
        return None
    keep = {q.id for q in queries}
    return dataclasses.replace(dataset, queries=queries, qrels={q: r for q, r in dataset.qrels.items() if q in keep})


def ranked(result: PassResult) -> dict[str, tuple[str, ...]]:
    """Query id → the document ids a pass returned, best first."""
    return {qid: run.doc_ids for qid, run in result.runs.items()}


def _hit(ranking: Sequence[str], qrels: Mapping[str, int], k: int) -> bool:
    return any(qrels.get(doc, 0) > 0 for doc in ranking[:k])


def hint_report(
    plain: Mapping[str, Sequence[str]], hinted: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]
) -> dict[str, Any]:
    """Hint-rate and Hit@1/Hit@5 over the hinted queries.

    Args:
        plain: query id → document ids returned for the query as written, best first.
        hinted: query id → document ids returned for the query with its hint (only hinted queries).
        qrels: query id → document id → relevance grade.
    """
    ids = [q for q in hinted if q in qrels]
    n = len(ids)
    if n == 0:
        return {"queries": 0, "hint_rate": 0.0, "hit_at_1": 0.0, "hit_at_5": 0.0, "hit_at_5_hinted": 0.0,
                "rescued": [], "missed_with_hint": []}  # fmt: skip
    hit1 = [q for q in ids if _hit(plain.get(q, ()), qrels[q], 1)]
    hit5 = {q for q in ids if _hit(plain.get(q, ()), qrels[q], 5)}
    hinted5 = {q for q in ids if _hit(hinted[q], qrels[q], 5)}
    rescued = [q for q in ids if q not in hit5 and q in hinted5]
    return {
        "queries": n,
        "hint_rate": round(len(rescued) / n, 6),
        "hit_at_1": round(len(hit1) / n, 6),
        "hit_at_5": round(len(hit5) / n, 6),
        "hit_at_5_hinted": round(len(hinted5) / n, 6),
        "rescued": rescued,
        "missed_with_hint": [q for q in ids if q not in hinted5],
    }


async def run_hinted(engine: SearchEngine, dataset: Dataset, plan: Any) -> PassResult:
    """The fused pass over ``dataset`` (already hinted) with the plan's lanes, fusion, mode and top-k, untimed."""
    return await run_pass(
        engine,
        dataset,
        name="hinted",
        lanes=plan.lanes,
        fusion=plan.fusion,
        mode=plan.mode,
        top_k=plan.top_k,
        concurrency=plan.concurrency,
        route=getattr(plan, "route", "all"),
    )
