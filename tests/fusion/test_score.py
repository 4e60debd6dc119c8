"""Tests for fusion.score: per-lane normalisation and weighted score fusion."""

from __future__ import annotations

import math

import pytest

from fusion import score
from fusion.score import fuse_scores, normalise_dbsf, normalise_minmax


class TestMinMax:
    def test_public_api(self) -> None:
        """The module exports the normalisers and the fuser."""
        assert sorted(score.__all__) == ["NORMALISERS", "fuse_scores", "normalise_dbsf", "normalise_minmax"]

    def test_empty(self) -> None:
        """An empty lane normalises to an empty list."""
        assert normalise_minmax([]) == []

    def test_single_item(self) -> None:
        """A single item sits at the lane's maximum."""
        assert normalise_minmax([3.7]) == [1.0]

    def test_equal_scores(self) -> None:
        """Equal scores all sit at the maximum (no division by zero)."""
        assert normalise_minmax([2.0, 2.0, 2.0]) == [1.0, 1.0, 1.0]

    def test_spans_unit_interval(self) -> None:
        """The best maps to 1 and the worst to 0."""
        assert normalise_minmax([10.0, 5.0, 0.0]) == [1.0, 0.5, 0.0]

    def test_non_finite_treated_as_lowest(self) -> None:
        """NaN and infinities do not poison the lane."""
        assert normalise_minmax([4.0, math.nan, 2.0]) == [1.0, 0.0, 0.0]


class TestDbsf:
    def test_empty(self) -> None:
        """An empty lane normalises to an empty list."""
        assert normalise_dbsf([]) == []

    def test_single_item(self) -> None:
        """A single item sits at the lane mean (0.5)."""
        assert normalise_dbsf([9.0]) == [0.5]

    def test_equal_scores(self) -> None:
        """Equal scores (σ = 0) all sit at the mean."""
        assert normalise_dbsf([1.0, 1.0]) == [0.5, 0.5]

    def test_mean_maps_to_half_and_range_clipped(self) -> None:
        """The mean maps to 0.5 and values stay in [0, 1]."""
        vals = normalise_dbsf([1.0, 2.0, 3.0])
        assert vals[1] == pytest.approx(0.5)
        assert all(0.0 <= v <= 1.0 for v in vals)
        assert vals[0] < vals[1] < vals[2]

    def test_outlier_clipped(self) -> None:
        """A far outlier is clipped to 1."""
        assert normalise_dbsf([0.0] * 20 + [1000.0])[-1] == 1.0


class TestFuseScores:
    def test_weights_applied(self) -> None:
        """Each lane's normalised score is multiplied by its weight."""
        assert fuse_scores({"a": 1.0, "b": 0.5}, {"a": 2.0, "b": 1.0}) == 2.5

    def test_combmnz_multiplies_by_lane_count(self) -> None:
        """CombMNZ multiplies the sum by the number of lanes that returned the item."""
        assert fuse_scores({"a": 1.0, "b": 0.5}, {}, combmnz=True) == 3.0
