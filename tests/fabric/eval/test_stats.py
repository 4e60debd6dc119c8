"""The paired bootstrap interval and randomisation test over per-query values."""

from __future__ import annotations

import pytest

from fabric.eval.stats import paired_test


class TestPairedTest:
    def test_identical_runs_have_no_difference(self) -> None:
        """The same values: mean 0, interval [0, 0], every query tied, p = 1."""
        t = paired_test([0.1, 0.5, 0.9], [0.1, 0.5, 0.9], resamples=200)
        assert (t.mean_delta, t.ci_low, t.ci_high) == (0.0, 0.0, 0.0)
        assert (t.wins, t.losses, t.ties) == (0, 0, 3)
        assert t.p_value == 1.0

    def test_a_constant_gain_is_significant(self) -> None:
        """Every one of 30 queries up by 0.1: the interval is that point and sign flips almost never reach it."""
        t = paired_test([0.6] * 30, [0.5] * 30, resamples=2000)
        assert t.mean_delta == pytest.approx(0.1)
        assert (t.ci_low, t.ci_high) == (pytest.approx(0.1), pytest.approx(0.1))
        assert t.wins == 30
        assert t.losses == 0
        assert t.p_value < 0.01

    def test_interval_brackets_a_noisy_mean(self) -> None:
        """Gains and losses of the same size cancel: the interval straddles 0 and the test finds nothing."""
        a = [1.0, 0.0] * 20
        b = [0.0, 1.0] * 20
        t = paired_test(a, b, resamples=2000)
        assert t.mean_delta == 0.0
        assert t.ci_low < 0.0 < t.ci_high
        assert t.p_value > 0.5
        assert (t.wins, t.losses) == (20, 20)

    def test_seeded_and_reproducible(self) -> None:
        """The same inputs and seed give the same interval and p-value."""
        a, b = [0.3, 0.7, 0.2, 0.9, 0.4], [0.2, 0.7, 0.4, 0.5, 0.4]
        assert paired_test(a, b, resamples=500) == paired_test(a, b, resamples=500)

    @pytest.mark.parametrize(("a", "b", "resamples"), [([], [], 10), ([0.1], [0.1, 0.2], 10), ([0.1], [0.1], 0)])
    def test_rejects_unpaired_or_empty_runs(self, a: list[float], b: list[float], resamples: int) -> None:
        """Runs of different lengths, empty runs and no resamples are errors."""
        with pytest.raises(ValueError, match=r"paired runs need|resamples must be"):
            paired_test(a, b, resamples=resamples)

    def test_to_dict_shape(self) -> None:
        """The artifact's shape: delta, interval, p, counts."""
        d = paired_test([0.5, 0.6], [0.5, 0.4], resamples=50).to_dict()
        assert set(d) == {"mean_delta", "ci95", "p_value", "wins", "losses", "ties", "resamples"}
        assert d["wins"] == 1
        assert d["ties"] == 1
