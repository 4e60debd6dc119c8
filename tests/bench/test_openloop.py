"""Tests of the open-loop load driver's pure parts (the serve child is exercised by tests/bench/test_scale.py)."""

from __future__ import annotations

import bench.openloop as mod
from bench.openloop import _Answer, _figures, unique_query
from lanes.graph._extract.entities import query_ngrams
from lanes.keyword.sqlite_fts.lane import query_terms


def test_unique_queries_differ_yet_search_the_same_terms() -> None:
    """Every request number gives another text, while the keyword terms and graph n-grams stay the query's."""
    text = "Vitamin D deficiency raises the risk of fractures"
    variants = [unique_query(text, i) for i in range(5000)]
    assert len(set(variants)) == 5000
    for v in (variants[0], variants[17], variants[4095]):
        assert query_terms(v) == query_terms(text)
        assert set(query_ngrams(v)) == set(query_ngrams(text))


def test_figures_split_answers_by_kind() -> None:
    """200s give the percentiles; 429/503 are rejections; anything else is an error."""
    answers = [
        _Answer(200, 10.0, items=5),
        _Answer(200, 30.0, items=0),
        _Answer(200, 20.0, items=3, partial=True),
        _Answer(503, 1.0, retry_after=True, reason="queue_full"),
        _Answer(429, 2.0, retry_after=True),
        _Answer(500, 5.0),
        _Answer(0, 30_000.0),
    ]
    f = _figures(100.0, answers, 0.07, [0.0, 1.0])
    assert (f["ok"], f["rejected"], f["rejected_503"], f["rejected_429"], f["errors"]) == (3, 2, 1, 1, 2)
    assert (f["p50_ms"], f["empty_answers"], f["partial_answers"], f["rps_achieved"]) == (20.0, 1, 1, 100.0)
    assert f["rejected_without_retry_after"] == 0
    assert f["rejected_by_reason"] == {"http_429": 1, "queue_full": 1}
    assert f["rejected_by_10s"] == [2]  # 7 answers at 100/s: one window
    assert (f["send_lag_p95_ms"], f["send_lag_max_ms"]) == (1.0, 1.0)
    assert _figures(100.0, answers, 0.07, [])["send_lag_max_ms"] is None


def test_refusals_are_counted_per_window_of_the_schedule() -> None:
    """At 2 requests/s a 10 s window is 20 answers: refusals land in the window their request was due in."""
    answers = [_Answer(200, 1.0)] * 45
    answers[3] = answers[21] = answers[22] = answers[44] = _Answer(503, 1.0, retry_after=True)
    assert _figures(2.0, answers, 22.5, [])["rejected_by_10s"] == [1, 2, 1]


def test_public_api() -> None:
    """The module's entry points."""
    assert sorted(mod.__all__) == ["LoadPlan", "ServeProcess", "drive", "unique_query"]
