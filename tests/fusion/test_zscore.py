"""Tests for fusion.zscore: the skew-aware z-score normalisation of fusion mode ``score_zscore``."""

from __future__ import annotations

import math
import statistics

import pytest

from fabric.core.models import FusionMode
from fusion import zscore
from fusion.combine import ModeScorer, collect
from fusion.score import NORMALISERS
from fusion.zscore import CAP_SD, FLOOR_SD, normalise_zscore
from tests.fusion.conftest import context, lane, outcomes


def _expected(scores: list[float]) -> list[float]:
    """The documented formula, written out independently with the statistics module."""
    mean, sigma = statistics.fmean(scores), statistics.pstdev(scores)
    lo = mean - FLOOR_SD * sigma
    return [min(1.0, max(0.0, (s - lo) / ((FLOOR_SD + CAP_SD) * sigma))) for s in scores]


class TestNormaliseZscore:
    def test_public_api(self) -> None:
        """The module exports the normaliser and its two constants; the fusion mode is registered."""
        assert sorted(zscore.__all__) == ["CAP_SD", "FLOOR_SD", "normalise_zscore"]
        assert NORMALISERS["score_zscore"] is normalise_zscore
        assert (FLOOR_SD, CAP_SD) == (1.5, 6.0)

    def test_empty(self) -> None:
        """An empty lane normalises to an empty list."""
        assert normalise_zscore([]) == []

    def test_single_and_equal_scores_are_neutral(self) -> None:
        """σ = 0 (one item, or equal scores) gives 0.5 to every item, no division by zero."""
        assert normalise_zscore([4.2]) == [0.5]
        assert normalise_zscore([2.0, 2.0, 2.0]) == [0.5, 0.5, 0.5]

    def test_matches_formula(self) -> None:
        """A skewed list (one standout, a flat tail) follows clip((s - (μ - 1.5σ)) / 7.5σ, 0, 1)."""
        scores = [30.0, 12.0, 11.5, 11.0, 10.8, 10.5, 10.2, 10.0, 9.9, 9.8]
        assert normalise_zscore(scores) == pytest.approx(_expected(scores))

    def test_mean_maps_to_floor_share(self) -> None:
        """A hit at the lane mean gets F / (F + Z) = 0.2."""
        vals = normalise_zscore([1.0, 2.0, 3.0])
        assert vals[1] == pytest.approx(FLOOR_SD / (FLOOR_SD + CAP_SD))
        assert vals[0] < vals[1] < vals[2]

    def test_order_kept_and_bounded(self) -> None:
        """Normalisation never reorders a lane and stays on [0, 1]."""
        scores = [0.91, 0.64, 0.61, 0.6, 0.58, 0.41, 0.4, 0.39, -0.2]
        vals = normalise_zscore(scores)
        assert vals == sorted(vals, reverse=True)
        assert all(0.0 <= v <= 1.0 for v in vals)

    def test_far_tail_is_zero_and_standout_is_one(self) -> None:
        """More than 1.5σ below the mean maps to 0; 6σ or more above maps to 1."""
        scores = [100.0] + [1.0] * 60 + [-30.0]
        vals = normalise_zscore(scores)
        z_top = (100.0 - statistics.fmean(scores)) / statistics.pstdev(scores)
        assert z_top > CAP_SD
        assert vals[0] == 1.0
        assert vals[-1] == 0.0

    def test_confidence_survives(self) -> None:
        """A standout best hit gets more than the best hit of a flat list (min-max would give both 1.0)."""
        standout = normalise_zscore([10.0, 2.0, 1.9, 1.8, 1.7, 1.6, 1.5, 1.4])
        flat = normalise_zscore([2.1, 2.0, 1.9, 1.8, 1.7, 1.6, 1.5, 1.4])
        assert standout[0] > flat[0]

    def test_scale_and_shift_invariant(self) -> None:
        """Only standard scores matter: a * s + b (a > 0) normalises the same as s."""
        scores = [3.0, 2.5, 1.0, 0.2, 0.1]
        assert normalise_zscore([7.0 * s - 4.0 for s in scores]) == pytest.approx(normalise_zscore(scores))

    def test_non_finite_treated_as_lowest(self) -> None:
        """NaN and infinities count as the lane's lowest finite score."""
        assert normalise_zscore([4.0, math.nan, 2.0, -math.inf]) == normalise_zscore([4.0, 2.0, 2.0, 2.0])
        assert normalise_zscore([math.nan, math.nan]) == [0.5, 0.5]

    def test_custom_window(self) -> None:
        """floor 3 / cap 3 is DBSF's window."""
        scores = [1.0, 2.0, 3.0, 10.0]
        mean, sigma = statistics.fmean(scores), statistics.pstdev(scores)
        want = [min(1.0, max(0.0, (s - (mean - 3 * sigma)) / (6 * sigma))) for s in scores]
        assert normalise_zscore(scores, floor=3.0, cap=3.0) == pytest.approx(want)

    @pytest.mark.parametrize(("floor", "cap"), [(-1.0, 6.0), (0.0, 0.0), (1.0, math.inf), (math.nan, 1.0)])
    def test_bad_window_rejected(self, floor: float, cap: float) -> None:
        """A negative floor or an empty/infinite window is a clear error."""
        with pytest.raises(ValueError, match="floor"):
            normalise_zscore([1.0, 2.0], floor=floor, cap=cap)


class TestInFusion:
    def test_standout_hit_beats_flat_top(self) -> None:
        """In ``score_zscore`` a lane's standout hit outranks the top of a flat lane; min-max ties them at 1."""
        strong = lane("kw", ["s", "a", "b", "c", "d", "e"], scores=[30.0, 5.0, 4.9, 4.8, 4.7, 4.6])
        flat = lane("vec", ["f", "g", "h", "i", "j", "k"], scores=[0.61, 0.6, 0.59, 0.58, 0.57, 0.56])
        base = {}
        for mode in (FusionMode.SCORE_ZSCORE, FusionMode.SCORE_MINMAX):
            run, cands = collect(outcomes(strong, flat), context(mode))
            scored = ModeScorer()(cands, run)
            base[mode] = dict(zip(scored.ids, scored.base, strict=True))
        z, mm = base[FusionMode.SCORE_ZSCORE], base[FusionMode.SCORE_MINMAX]
        assert z["s"] > z["f"]
        assert mm["s"] == mm["f"]
        assert all(0.0 <= v <= 1.0 for v in z.values())
