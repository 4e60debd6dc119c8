"""Tests for fusion.confidence: a lane's weight factor from the level of its top score."""

from __future__ import annotations

import math

import pytest

from fabric.settings import LaneConfidence
from fusion.confidence import confidence_factor

CAL = LaneConfidence(reference=0.62, slope=2.0, min=0.25, max=1.5)


class TestConfidenceFactor:
    def test_reference_gives_one(self) -> None:
        """A top score at the reference leaves the weight as configured."""
        assert confidence_factor(0.62, CAL) == pytest.approx(1.0)

    def test_linear_between_the_bounds(self) -> None:
        """Inside the bounds the factor is 1 + slope · (top − reference), on both sides of the reference."""
        assert confidence_factor(0.47, CAL) == pytest.approx(0.7)
        assert confidence_factor(0.72, CAL) == pytest.approx(1.2)

    def test_clipped_to_min_and_max(self) -> None:
        """A very weak top score cannot silence the lane, a very strong one cannot take over the fusion."""
        assert confidence_factor(-0.3, CAL) == 0.25
        assert confidence_factor(0.99, CAL) == 1.5

    def test_zero_slope_is_off(self) -> None:
        """slope = 0 (the seed profile) keeps every weight, whatever the score."""
        off = LaneConfidence(reference=0.62, slope=0.0, min=0.25, max=1.5)
        assert confidence_factor(0.1, off) == 1.0

    @pytest.mark.parametrize("score", [math.nan, math.inf, -math.inf])
    def test_non_finite_score_keeps_the_weight(self, score: float) -> None:
        """A score that is not a number says nothing about confidence."""
        assert confidence_factor(score, CAL) == 1.0
