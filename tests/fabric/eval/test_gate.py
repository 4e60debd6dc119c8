"""Gate thresholds (US-004-004) and the latency normalisation by calibration."""

from __future__ import annotations

from typing import Any

import pytest

from fabric.eval.calibration import CalibrationClock, calibration_sample
from fabric.eval.gate import MIN_LATENCY_QUERIES, THRESHOLDS, evaluate_gate, latency_within, normalised_p95


def _artifact(ndcg=0.70, mrr=0.65, r20=0.80, p95=100.0, unit: float | None = 10.0, **ds: Any) -> dict[str, Any]:
    return {
        "dataset": {"name": "x", "split": "train", "queries": 300, "corpus_hash": "h", **ds},
        "metrics": {"fused": {"ndcg_at_10": ndcg, "mrr_at_10": mrr, "recall_at_20": r20, "latency_p95_ms": p95}},
        "latency": {"calibration_ms": unit},
    }


def _failed(result) -> set[str]:
    return {c.metric for c in result.checks if not c.passed}


class TestThresholds:
    def test_identical_runs_pass(self) -> None:
        """A run equal to its baseline passes every check."""
        assert evaluate_gate(_artifact(), _artifact()).passed

    @pytest.mark.parametrize(
        ("kwargs", "metric"),
        [
            ({"ndcg": 0.70 * 0.979}, "ndcg_at_10"),
            ({"mrr": 0.65 * 0.979}, "mrr_at_10"),
            ({"r20": 0.80 * 0.989}, "recall_at_20"),
        ],
    )
    def test_quality_drop_past_threshold_fails(self, kwargs: dict[str, float], metric: str) -> None:
        """A relative drop just past the threshold fails that metric only."""
        result = evaluate_gate(_artifact(**kwargs), _artifact())
        assert not result.passed
        assert _failed(result) == {metric}

    @pytest.mark.parametrize(
        "kwargs", [{"ndcg": 0.70 * 0.981}, {"mrr": 0.65 * 0.981}, {"r20": 0.80 * 0.991}, {"p95": 109.0}]
    )
    def test_change_within_threshold_passes(self, kwargs: dict[str, float]) -> None:
        """A drop (or latency rise) within its threshold passes."""
        assert evaluate_gate(_artifact(**kwargs), _artifact()).passed

    def test_improvement_passes(self) -> None:
        """Better quality and lower latency pass."""
        assert evaluate_gate(_artifact(ndcg=0.9, mrr=0.9, r20=0.9, p95=50.0), _artifact()).passed

    def test_thresholds_match_the_spec(self) -> None:
        """The thresholds are the seed's 2 % / 2 % / 1 % / 10 %."""
        assert THRESHOLDS == {
            "ndcg_at_10": ("drop", 0.02),
            "mrr_at_10": ("drop", 0.02),
            "recall_at_20": ("drop", 0.01),
            "latency_p95_ms": ("rise", 0.10),
        }


class TestLatencyNormalisation:
    def test_slower_machine_with_slower_calibration_passes(self) -> None:
        """p95 up 50 % on a machine whose calibration unit is also 50 % slower passes."""
        result = evaluate_gate(_artifact(p95=150.0, unit=15.0), _artifact())
        assert result.passed
        check = next(c for c in result.checks if c.metric == "latency_p95_ms")
        assert check.compared == "normalised"

    def test_slower_engine_on_same_machine_fails(self) -> None:
        """p95 up 20 % with an unchanged calibration unit fails the latency check."""
        result = evaluate_gate(_artifact(p95=120.0), _artifact())
        assert _failed(result) == {"latency_p95_ms"}

    def test_without_calibration_compares_raw(self) -> None:
        """When the baseline has no calibration figure, raw p95s are compared."""
        result = evaluate_gate(_artifact(p95=150.0, unit=15.0), _artifact(unit=None))
        check = next(c for c in result.checks if c.metric == "latency_p95_ms")
        assert (check.compared, check.passed) == ("raw", False)


def _with_attempts(art: dict[str, Any], *normalised: float) -> dict[str, Any]:
    art["latency"]["attempts"] = [{"p95_ms": n * 10.0, "calibration_ms": 10.0, "p95_normalised": n} for n in normalised]
    return art


class TestLatencyAttempts:
    def test_best_attempt_counts(self) -> None:
        """With several timed passes, the lowest normalised p95 is compared (one slow burst does not fail)."""
        result = evaluate_gate(_with_attempts(_artifact(p95=150.0), 12.5, 10.5), _with_attempts(_artifact(), 10.0))
        check = next(c for c in result.checks if c.metric == "latency_p95_ms")
        assert (check.current, check.baseline, check.passed) == (10.5, 10.0, True)
        assert check.compared == "normalised, best of 2"

    def test_every_attempt_slow_fails(self) -> None:
        """A genuinely slower engine is slow in every attempt and fails."""
        result = evaluate_gate(_with_attempts(_artifact(), 11.5, 11.2, 11.4), _with_attempts(_artifact(), 10.0))
        assert _failed(result) == {"latency_p95_ms"}

    def test_old_style_baseline_is_normalised_by_its_unit(self) -> None:
        """A baseline without attempts is p95 / calibration unit."""
        assert normalised_p95(_artifact(p95=100.0, unit=8.0)) == 12.5
        assert normalised_p95(_artifact(unit=None)) is None

    def test_latency_within(self) -> None:
        """latency_within applies the 10 % threshold to a normalised figure; no baseline unit passes."""
        base = _with_attempts(_artifact(), 10.0)
        assert latency_within(10.9, base)
        assert not latency_within(11.1, base)
        assert latency_within(99.0, _artifact(unit=None))


class TestComparability:
    def test_different_dataset_fails_with_problem(self) -> None:
        """Gating against a baseline of another corpus fails and says why."""
        result = evaluate_gate(_artifact(corpus_hash="other"), _artifact())
        assert not result.passed
        assert "corpus_hash" in result.problems[0]

    def test_to_dict_has_per_metric_decisions(self) -> None:
        """The gate section lists every metric with its pass/fail."""
        out = evaluate_gate(_artifact(ndcg=0.1), _artifact()).to_dict()
        assert out["passed"] is False
        assert out["checks"]["ndcg_at_10"]["passed"] is False
        assert out["checks"]["mrr_at_10"]["passed"] is True


class TestCalibration:
    def test_sample_is_positive(self) -> None:
        """One calibration sample takes measurable time."""
        assert calibration_sample() > 0.0

    def test_clock_samples_every_n_ticks(self) -> None:
        """The clock samples once per `every` ticks and reports the median."""
        clock = CalibrationClock(every=3)
        for _ in range(7):
            clock.tick()
        assert len(clock.samples) == 2
        assert clock.unit_ms is not None

    def test_empty_clock_has_no_unit(self) -> None:
        """Before any sample the unit is None."""
        assert CalibrationClock().unit_ms is None

    def test_rejects_bad_interval(self) -> None:
        """every < 1 is a programming error."""
        with pytest.raises(ValueError, match="every"):
            CalibrationClock(every=0)


class TestSmallQuerySets:
    def test_latency_of_a_small_run_is_reported_not_gated(self) -> None:
        """A run of fewer than MIN_LATENCY_QUERIES queries passes a p95 rise, saying it was not gated."""
        n = MIN_LATENCY_QUERIES - 1
        result = evaluate_gate(_artifact(p95=300.0, queries=n), _artifact(p95=100.0, queries=n))
        (latency,) = [c for c in result.checks if c.metric == "latency_p95_ms"]
        assert latency.passed
        assert f"not gated: {n} queries" in latency.compared

    def test_quality_of_a_small_run_still_gates(self) -> None:
        """The quality metrics gate whatever the number of queries."""
        n = MIN_LATENCY_QUERIES - 1
        result = evaluate_gate(_artifact(ndcg=0.5, queries=n), _artifact(ndcg=0.7, queries=n))
        assert "ndcg_at_10" in _failed(result)


class TestRoute:
    def test_a_baseline_of_another_route_is_not_comparable(self) -> None:
        """The gate compares like with like: a run under route auto against a federation baseline is a problem."""
        current = {**_artifact(), "config": {"route": "auto"}}
        result = evaluate_gate(current, _artifact())  # no config.route: recorded before routes, the federation
        assert not result.passed
        assert result.problems == ("config.route differs: baseline 'all', current 'auto'",)
        assert evaluate_gate(current, {**_artifact(), "config": {"route": "auto"}}).passed
