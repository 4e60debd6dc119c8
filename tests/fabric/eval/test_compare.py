"""Per-query comparisons of the eval report: against the best single lane and the federation."""

from __future__ import annotations

from fabric.eval.compare import best_lane, compare_artifacts, compare_runs, comparison_lines


def _run(values: dict[str, float]) -> dict[str, dict[str, float]]:
    return {q: {"ndcg_at_10": v, "mrr_at_10": v, "recall_at_100": v} for q, v in values.items()}


class TestBestLane:
    def test_highest_mean_ndcg(self) -> None:
        """The lane with the highest nDCG@10 mean; none without lanes."""
        assert best_lane({"keyword": {"ndcg_at_10": 0.4}, "vector": {"ndcg_at_10": 0.5}}) == "vector"
        assert best_lane({}) is None


class TestCompareRuns:
    def test_counts_wins_losses_and_lists_the_worst_losses(self) -> None:
        """Wins, losses and ties on nDCG@10, the losses worst first, a query missing from a run scoring 0."""
        fused = _run({"q1": 0.9, "q2": 0.2, "q3": 0.5})
        lane = _run({"q1": 0.5, "q2": 0.8, "q3": 0.5, "q4": 0.3})
        out = compare_runs(fused, lane, ["q1", "q2", "q3", "q4"], against="best lane (keyword)")
        ndcg = out["ndcg_at_10"]
        assert (ndcg["wins"], ndcg["losses"], ndcg["ties"]) == (1, 2, 1)
        assert [w["query_id"] for w in out["worst_losses"]] == ["q2", "q4"]
        assert out["worst_losses"][0]["ndcg_at_10_delta"] == -0.6
        assert set(out) == {"against", "ndcg_at_10", "mrr_at_10", "recall_at_100", "worst_losses"}

    def test_markdown_names_each_comparison(self) -> None:
        """The report's table has a row per comparison and metric, and the worst losses."""
        fused, lane = _run({"q1": 0.9, "q2": 0.1}), _run({"q1": 0.5, "q2": 0.4})
        section = {"best_lane": compare_runs(fused, lane, ["q1", "q2"], against="best lane (vector)")}
        text = "\n".join(comparison_lines(section))
        assert "| best lane (vector) | ndcg_at_10 |" in text
        assert "q2 (-0.300)" in text
        assert comparison_lines({}) == []


class TestCompareArtifacts:
    def _artifact(self, values: dict[str, float], **dataset: str) -> dict[str, object]:
        return {"dataset": {"name": "x", "split": "test", **dataset}, "per_query": _run(values)}

    def test_query_by_query_against_another_run(self) -> None:
        """Two artifacts of the same dataset and split compare on their per-query figures."""
        out = compare_artifacts(
            self._artifact({"q1": 0.8, "q2": 0.4}), self._artifact({"q1": 0.5, "q2": 0.4}), against="old.json"
        )
        assert out is not None
        assert (out["ndcg_at_10"]["wins"], out["ndcg_at_10"]["ties"]) == (1, 1)
        assert out["ndcg_at_10"]["mean_delta"] == 0.15

    def test_nothing_to_compare(self) -> None:
        """An artifact without per-query figures, or of another split, gives no comparison."""
        current = self._artifact({"q1": 0.8})
        assert compare_artifacts(current, {"dataset": {"name": "x", "split": "test"}}, against="a") is None
        assert compare_artifacts(current, self._artifact({"q1": 0.8}, split="train"), against="a") is None
