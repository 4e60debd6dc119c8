"""Tests for fabric.eval.slowcook: failure cases, the comparison with the previous receipt, the verdict, the receipt.

The command end to end (real ingest, real engine) is in ``tests/fabric/cli/test_slowcook.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import fabric.eval.slowcook as mod
from fabric.core.errors import ConfigError
from fabric.eval.dataset import Dataset, EvalQuery
from fabric.eval.runner import FUSED, PassResult, QueryRun
from fabric.eval.slowcook import (
    RECEIPT_KIND,
    build_receipt,
    compare,
    failure_cases,
    load_previous,
    per_query,
    verdict_line,
)
from fabric.settings import load_settings

QRELS = {"a": {"A": 2, "A2": 1}, "b": {"B": 2}, "c": {"C": 1}, "d": {"D": 1}}
TOLERANCE = {"ndcg_at_10": 0.02, "hit_at_5": 0.0}


def _dataset() -> Dataset:
    return Dataset(
        root=Path("q"),
        name="t",
        split="test",
        corpus=Path("corpus"),
        corpus_format="markdown",
        queries=tuple(EvalQuery(id=q, text=f"query {q}") for q in QRELS),
        qrels=QRELS,
    )


def _pass(rankings: dict[str, list[str]]) -> PassResult:
    runs = {
        q: QueryRun(query_id=q, doc_ids=tuple(docs), latency_ms=1.0, top_score=0.5 if docs else None,
                    top_title=f"title of {docs[0]}" if docs else "")
        for q, docs in rankings.items()
    }  # fmt: skip
    return PassResult(name=FUSED, lanes=("keyword",), runs=runs)


# a: found first; b: found third; c: not found at all; d: found sixth (outside the top 5)
RANKED = {"a": ["A", "X"], "b": ["X", "Y", "B"], "c": ["X", "Y"], "d": ["1", "2", "3", "4", "5", "D"]}


class TestFailureCases:
    def test_worst_first_with_what_came_first(self) -> None:
        """Queries whose target is not first, missed ones before found ones; each names what came first."""
        cases, count = failure_cases(_dataset(), _pass(RANKED), limit=10)
        assert count == 3
        assert [c["query_id"] for c in cases] == ["c", "d", "b"]
        c = cases[0]
        assert (c["query"], c["expected"], c["expected_rank"]) == ("query c", ["C"], None)
        assert c["first"] == {"doc_id": "X", "title": "title of X", "score": 0.5}
        assert cases[1]["expected_rank"] == 6

    def test_limit_and_newly_missed_first(self) -> None:
        """The limit keeps the worst; a newly missed query comes before every other failure."""
        cases, count = failure_cases(_dataset(), _pass(RANKED), limit=2, newly_missed=["d"])
        assert (count, [c["query_id"] for c in cases]) == (3, ["d", "c"])

    def test_expected_lists_the_most_relevant_first_and_an_empty_answer(self) -> None:
        """Expected documents are sorted by grade; an empty answer has no first item."""
        cases, _ = failure_cases(_dataset(), _pass({**RANKED, "a": []}), limit=10)
        a = next(c for c in cases if c["query_id"] == "a")
        assert (a["expected"], a["first"], a["ndcg_at_10"]) == (["A", "A2"], None, 0.0)

    def test_a_query_with_nothing_relevant(self) -> None:
        """A query judged only 0 has no expected document and no rank: a failure case, never an IndexError."""
        ds = _dataset()
        zero = Dataset(root=ds.root, name=ds.name, split=ds.split, corpus=ds.corpus, corpus_format=ds.corpus_format,
                       queries=(EvalQuery(id="z", text="query z"),), qrels={"z": {"Z": 0}})  # fmt: skip
        cases, count = failure_cases(zero, _pass({"z": ["Z"]}), limit=5)
        assert (count, cases[0]["expected"], cases[0]["expected_rank"]) == (1, [], None)


class TestCompare:
    def test_no_previous_is_the_baseline(self) -> None:
        """Without a previous receipt nothing is compared and nothing fails."""
        out = compare(None, {"ndcg_at_10": 0.5}, {"a": {"hit_at_5": True}}, TOLERANCE)
        assert (out["previous"], out["regressions"], out["newly_missed"]) == (None, [], [])

    def test_drop_within_tolerance_passes_beyond_it_regresses(self) -> None:
        """nDCG@10 may fall by its tolerance (0.02) and no more; Hit@5 by nothing."""
        prev = {"time": "t0", "metrics": {"ndcg_at_10": 0.80, "hit_at_5": 1.0}, "per_query": {"a": {"hit_at_5": True}}}
        ok = compare(prev, {"ndcg_at_10": 0.78, "hit_at_5": 1.0}, {"a": {"hit_at_5": True}}, TOLERANCE)
        assert ok["regressions"] == []
        assert ok["metrics"]["ndcg_at_10"]["change"] == pytest.approx(-0.02)
        bad = compare(prev, {"ndcg_at_10": 0.77, "hit_at_5": 1.0}, {"a": {"hit_at_5": True}}, TOLERANCE)
        assert bad["regressions"] == ["ndcg_at_10"]
        assert bad["newly_missed"] == []

    def test_newly_missed_needs_a_hit_last_time(self) -> None:
        """Found in the top 5 last time and not now: newly missed; missed both times or new to the set: not."""
        prev = {
            "metrics": {},
            "per_query": {"a": {"hit_at_5": True}, "b": {"hit_at_5": False}, "c": {"hit_at_5": True}},
        }
        now = {"a": {"hit_at_5": False}, "b": {"hit_at_5": False}, "c": {"hit_at_5": True}}
        assert compare(prev, {}, now, TOLERANCE)["newly_missed"] == ["a"]
        grown = {**now, "e": {"hit_at_5": False}}
        out = compare(prev, {"ndcg_at_10": 0.0}, grown, TOLERANCE)
        assert (out["newly_missed"], out["metrics"]) == (["a"], {})
        assert "query set changed" in out["note"]


class TestVerdictLine:
    def test_one_line_names_the_query_and_the_metric(self) -> None:
        """The failure line names each newly missed query with its text and target, and each regressed metric."""
        prev = {"time": "t0", "metrics": {"ndcg_at_10": 0.9}, "per_query": {"a": {"hit_at_5": True}}}
        comparison = compare(prev, {"ndcg_at_10": 0.5}, {"a": {"hit_at_5": False}}, TOLERANCE)
        line = verdict_line(comparison, {"a": {"query": "query a", "expected": ["A"]}})
        assert "\n" not in line
        assert line.startswith("fabric slowcook: REGRESSION: 1 newly missed query: a ('query a' → expected A)")
        assert "nDCG@10 0.9000 → 0.5000 (-0.4000, tolerance 0.02)" in line

    def test_pass_and_baseline(self) -> None:
        """No failure: the line says so (baseline on a first run)."""
        assert "baseline" in verdict_line(compare(None, {}, {}, TOLERANCE), {})
        prev = {"time": "t0", "metrics": {}, "per_query": {}}
        assert verdict_line(compare(prev, {}, {}, TOLERANCE), {}).endswith("since t0")


class TestLoadPrevious:
    def test_missing_is_none(self, tmp_path: Path) -> None:
        """No previous receipt: the first run."""
        assert load_previous(tmp_path / "receipt.json") is None

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("{not json", "not valid JSON"),
            ('{"metrics": {}}', "not a slow-cook receipt"),
            (json.dumps({"kind": RECEIPT_KIND, "metrics": {}}), "no per_query table"),
        ],
    )
    def test_bad_receipt_is_a_config_error(self, tmp_path: Path, text: str, message: str) -> None:
        """A file that is not a receipt is refused with a message naming it (exit 2 at the CLI)."""
        path = tmp_path / "receipt.json"
        path.write_text(text)
        with pytest.raises(ConfigError, match=message) as caught:
            load_previous(path)
        assert str(path) in str(caught.value)


ALLOWLIST = {"include": ["decisions"], "exclude": [], "set_by": {"include": "config", "exclude": "default"},
             "admitted": 4, "excluded": 2, "unmatched": []}  # fmt: skip
TRUST = {"trusted": 4, "untrusted": 0, "rules": [{"rule": "**/decisions/**", "trust": "trusted", "docs": 4}]}


def _receipt(previous: dict[str, Any] | None, rankings: dict[str, list[str]]) -> dict[str, Any]:
    counts = {"docs": 4, "chunks": 4, "created": 0, "updated": 1, "unchanged": 3, "deleted": 0, "repaired": 0}
    ingest = {"source": "markdown:corpus", **counts, "pending": 0, "embeddings": "ok", "stores": {"sqlite_fts": "ok"},
              "allowlist": ALLOWLIST, "trust": TRUST}  # fmt: skip
    return build_receipt(
        settings=load_settings(env={}), dataset=_dataset(), lanes=["keyword"], ingest=ingest,
        fused=_pass(rankings), hints=None, previous=previous, extra={"receipt_path": "r.json"},
    )  # fmt: skip


class TestBuildReceipt:
    def test_first_receipt_then_a_regression(self) -> None:
        """A first receipt is the baseline (naming the allowlist and trust that produced the corpus); losing b's
        target from the top 5 then fails naming b."""
        first = _receipt(None, RANKED)
        assert first["kind"] == RECEIPT_KIND
        assert (first["verdict"]["status"], first["verdict"]["exit_code"]) == ("baseline", 0)
        assert first["corpus"] == {"source": "markdown:corpus", "docs": 4, "chunks": 4, "added": 0, "updated": 1,
                                   "unchanged": 3, "deleted": 0, "repaired": 0, "pending": 0, "embeddings": "ok",
                                   "stores": {"sqlite_fts": "ok"}, "allowlist": ALLOWLIST, "trust": TRUST}  # fmt: skip
        assert first["metrics"]["hit_at_5"] == 0.5
        assert first["per_query"] == per_query(_dataset(), _pass(RANKED))
        assert json.loads(json.dumps(first)) == first
        same = _receipt(first, RANKED)
        assert same["verdict"]["status"] == "pass"
        worse = _receipt(first, {**RANKED, "b": ["X"]})
        assert worse["verdict"]["status"] == "regression"
        assert worse["verdict"]["exit_code"] == 1
        assert [c["query_id"] for c in worse["newly_missed"]] == ["b"]
        assert worse["failures"][0]["query_id"] == "b"
        # b was third: nDCG@10, MRR@10 and Hit@5 fall beyond their tolerances, Hit@1 does not move
        assert set(worse["comparison"]["regressions"]) == {"ndcg_at_10", "mrr_at_10", "hit_at_5"}


def test_public_api() -> None:
    """The module exports the job, the receipt pieces and the receipt kind."""
    assert set(mod.__all__) == {
        "RECEIPT_KIND", "build_receipt", "compare", "cook", "corpus_changes", "failure_cases", "load_previous",
        "per_query", "verdict_line",
    }  # fmt: skip
