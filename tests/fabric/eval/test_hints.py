"""Tests for fabric.eval.hints: seed 002's hint-rate over queries with a follow-up keyword hint."""

from __future__ import annotations

from pathlib import Path

from fabric.core.models import FusionMode, Mode
from fabric.eval.dataset import Dataset, EvalQuery
from fabric.eval.hints import hint_report, hinted_dataset, ranked, run_hinted
from fabric.eval.runner import FUSED
from tests.fabric.eval.fake_engine import FakeEngine


def _dataset(*queries: EvalQuery) -> Dataset:
    return Dataset(
        root=Path("."),
        name="t",
        split="test",
        corpus=Path("corpus.jsonl"),
        corpus_format="beir",
        queries=queries,
        qrels={q.id: {f"d{q.id}": 1} for q in queries},
    )


class TestHintedDataset:
    def test_only_hinted_queries_with_hint_appended(self) -> None:
        """Hinted queries keep their id and get ``text hint``; the others and their qrels are dropped."""
        ds = _dataset(EvalQuery(id="1", text="sluggish source", hint="budgets"), EvalQuery(id="2", text="plain"))
        hinted = hinted_dataset(ds)
        assert hinted is not None
        assert [(q.id, q.text) for q in hinted.queries] == [("1", "sluggish source budgets")]
        assert list(hinted.qrels) == ["1"]

    def test_no_hints_gives_none(self) -> None:
        """A dataset without hints (SciFact, CISI) runs no extra pass."""
        assert hinted_dataset(_dataset(EvalQuery(id="1", text="x"))) is None


QRELS = {"a": {"A": 1}, "b": {"B": 2}, "c": {"C": 1}, "d": {"D": 1, "X": 0}}


class TestHintReport:
    def test_rate_counts_only_misses_rescued_by_the_hint(self) -> None:
        """Missed at Hit@5 without and found with the hint: b only (a found both ways, c never, d judged 0)."""
        plain = {"a": ["A"], "b": ["1", "2", "3", "4", "5", "B"], "c": ["Z"], "d": ["X"]}
        hinted = {"a": ["A"], "b": ["B"], "c": ["Y"], "d": ["X"]}
        report = hint_report(plain, hinted, QRELS)
        assert report["queries"] == 4
        assert report["hint_rate"] == 0.25
        assert (report["hit_at_1"], report["hit_at_5"], report["hit_at_5_hinted"]) == (0.25, 0.25, 0.5)
        assert report["rescued"] == ["b"]
        assert report["missed_with_hint"] == ["c", "d"]

    def test_hint_that_loses_the_target_is_not_a_rescue(self) -> None:
        """A hint that pushes the target out of the top 5 lowers Hit@5 with the hint, not the rate."""
        report = hint_report({"a": ["A"]}, {"a": ["1", "2", "3", "4", "5", "A"]}, QRELS)
        assert (report["hint_rate"], report["hit_at_5"], report["hit_at_5_hinted"]) == (0.0, 1.0, 0.0)

    def test_no_hinted_queries(self) -> None:
        """No hinted query gives zeros, not a division by zero."""
        assert hint_report({}, {}, QRELS)["queries"] == 0


class TestRunHinted:
    async def test_searches_hinted_text_with_plan_settings(self, tmp_path: Path) -> None:
        """The hinted pass sends ``text hint`` with the plan's lanes, fusion, mode and top-k."""
        from fabric.eval.harness import EvalPlan

        corpus = tmp_path / "corpus.jsonl"
        corpus.write_text('{"_id": "d1", "text": "time budgets per lane"}\n{"_id": "d2", "text": "sluggish"}\n')
        ds = hinted_dataset(_dataset(EvalQuery(id="1", text="source", hint="budgets")))
        assert ds is not None
        engine = FakeEngine(corpus)
        plan = EvalPlan(lanes=("keyword",), fusion=FusionMode.SCORE_ZSCORE, mode=Mode.SIMPLE, top_k=5)
        result = await run_hinted(engine, ds, plan)
        assert result.name == "hinted" != FUSED
        assert ranked(result) == {"1": ("d1",)}
        req = engine.requests[0]
        assert (req.query, req.lanes, req.fusion, req.top_k) == (
            "source budgets",
            ("keyword",),
            FusionMode.SCORE_ZSCORE,
            5,
        )
