"""Metrics equal ranx's (trec_eval semantics) on fixtures, plus hand-checked edge cases."""

from __future__ import annotations

import math
import random

import pytest

from fabric.eval import metrics
from fabric.eval.metrics import METRIC_KEYS, average, dedupe, query_metrics

_RANX_NAMES = {
    "ndcg_at_10": "ndcg@10",
    "mrr_at_10": "mrr@10",
    "recall_at_10": "recall@10",
    "recall_at_20": "recall@20",
    "recall_at_100": "recall@100",
    "precision_at_10": "precision@10",
    "hit_at_1": "hit_rate@1",
    "hit_at_5": "hit_rate@5",
}


def _fixture() -> tuple[dict[str, dict[str, int]], dict[str, list[str]]]:
    """Seeded random graded qrels (grades 0-3, some zero-only judgements) and rankings of 0-120 docs."""
    rng = random.Random(20261122)
    docs = [f"d{i}" for i in range(300)]
    qrels: dict[str, dict[str, int]] = {}
    runs: dict[str, list[str]] = {}
    for q in range(40):
        qid = f"q{q}"
        judged = rng.sample(docs, rng.randint(1, 12))
        qrels[qid] = {d: rng.choice([0, 1, 1, 2, 3]) for d in judged}
        qrels[qid][judged[0]] = max(1, qrels[qid][judged[0]])
        pool = judged + rng.sample(docs, 150)
        rng.shuffle(pool)
        runs[qid] = dedupe(pool)[: rng.choice([0, 3, 10, 25, 120])]
    return qrels, runs


@pytest.fixture(scope="module")
def ranx_scores() -> dict[str, float]:
    """ranx's figures for the fixture (ranx is imported here only: numba compilation is slow)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from ranx import Qrels, Run, evaluate

        qrels, runs = _fixture()
        run_dict = {q: {d: float(len(ids) - i) for i, d in enumerate(ids)} for q, ids in runs.items() if ids}
        out = evaluate(
            Qrels.from_dict(qrels), Run.from_dict(run_dict), list(_RANX_NAMES.values()), make_comparable=True
        )
    return {k: float(v) for k, v in out.items()}


class TestAgainstRanx:
    @pytest.mark.parametrize("key", METRIC_KEYS)
    def test_metric_equals_ranx(self, key: str, ranx_scores: dict[str, float]) -> None:
        """Each averaged metric equals ranx's on 40 random graded queries (empty rankings included)."""
        qrels, runs = _fixture()
        per_query = {q: query_metrics(runs[q], qrels[q]) for q in qrels}
        ours = average(per_query, list(qrels))[key]
        assert ours == pytest.approx(ranx_scores[_RANX_NAMES[key]], abs=1e-9)


class TestQueryMetrics:
    def test_graded_ndcg_uses_linear_gain(self) -> None:
        """nDCG@10 uses the grade as gain and log2(rank + 1) as discount."""
        got = query_metrics(["b", "a"], {"a": 2, "b": 1})["ndcg_at_10"]
        ideal = 2 + 1 / math.log2(3)
        assert got == pytest.approx((1 + 2 / math.log2(3)) / ideal)

    def test_zero_grade_is_not_relevant(self) -> None:
        """A judgement with grade 0 counts for no metric."""
        m = query_metrics(["z", "a"], {"z": 0, "a": 1})
        assert (m["hit_at_1"], m["mrr_at_10"], m["recall_at_10"]) == (0.0, 0.5, 1.0)

    def test_duplicate_doc_ids_count_once_at_first_rank(self) -> None:
        """Chunks of one document collapse to its first position before scoring."""
        m = query_metrics(["x", "x", "x", "a"], {"a": 1})
        assert m["mrr_at_10"] == 0.5

    def test_mrr_ignores_hits_past_rank_ten(self) -> None:
        """MRR@10 is 0 when the first relevant doc is at rank 11."""
        ranking = [f"n{i}" for i in range(10)] + ["a"]
        assert query_metrics(ranking, {"a": 1})["mrr_at_10"] == 0.0

    def test_precision_divides_by_k(self) -> None:
        """precision@10 divides by 10 even when fewer docs came back."""
        assert query_metrics(["a"], {"a": 1})["precision_at_10"] == pytest.approx(0.1)

    def test_no_relevant_judgement_scores_zero(self) -> None:
        """A query whose judgements are all grade 0 scores 0 everywhere (no division by zero)."""
        assert set(query_metrics(["a"], {"a": 0}).values()) == {0.0}


class TestAverage:
    def test_missing_query_counts_as_zero(self) -> None:
        """A judged query without a ranking pulls the mean down."""
        per_query = {"q1": dict.fromkeys(METRIC_KEYS, 1.0)}
        assert average(per_query, ["q1", "q2"])["ndcg_at_10"] == 0.5

    def test_no_queries_is_all_zero(self) -> None:
        """Averaging over no queries returns zeros, not an error."""
        assert set(average({}, []).values()) == {0.0}


def test_public_api() -> None:
    """The module exports exactly its documented names."""
    assert set(metrics.__all__) == {"METRIC_KEYS", "average", "dedupe", "query_metrics"}
