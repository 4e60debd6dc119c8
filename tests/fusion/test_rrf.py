"""Tests for fusion.rrf: the one RRF function and its ceiling."""

from __future__ import annotations

import pytest

from fusion import rrf
from fusion.rrf import DEFAULT_K, fuse_rrf, rrf_ceiling


class TestFuseRrf:
    def test_public_api(self) -> None:
        """The module exports the RRF function, its ceiling and the default k."""
        assert sorted(rrf.__all__) == ["DEFAULT_K", "fuse_rrf", "rrf_ceiling"]

    def test_ranks_are_one_based_with_k_60(self) -> None:
        """The first id of a lane scores exactly 1 / (60 + 1)."""
        assert DEFAULT_K == 60
        assert fuse_rrf({"a": ["x", "y"]}) == {"x": 1 / 61, "y": 1 / 62}

    def test_sums_over_lanes(self) -> None:
        """An id in two lanes gets the sum of its reciprocal ranks."""
        assert fuse_rrf({"a": ["x", "y"], "b": ["y"]})["y"] == 1 / 62 + 1 / 61

    def test_in_lane_duplicate_counts_once(self) -> None:
        """A repeated id adds no RRF mass and the next id closes up to the free rank."""
        scores = fuse_rrf({"a": ["x", "x", "y"]})
        assert scores == {"x": 1 / 61, "y": 1 / 62}

    def test_weights_scale_each_lane(self) -> None:
        """A lane weight multiplies that lane's contribution."""
        assert fuse_rrf({"a": ["x"], "b": ["x"]}, weights={"a": 2.0, "b": 0.5})["x"] == 2.0 / 61 + 0.5 / 61

    def test_zero_weight_lane_contributes_nothing(self) -> None:
        """A lane with weight 0 adds no score."""
        assert fuse_rrf({"a": ["x"], "b": ["y"]}, weights={"b": 0.0})["y"] == 0.0

    def test_custom_k(self) -> None:
        """k is configurable."""
        assert fuse_rrf({"a": ["x"]}, k=10) == {"x": 1 / 11}

    def test_rejects_non_positive_k(self) -> None:
        """k must be positive."""
        with pytest.raises(ValueError, match="k must be > 0"):
            fuse_rrf({"a": ["x"]}, k=0)

    def test_ranks_out_records_ranks_used(self) -> None:
        """ranks_out receives the 1-based rank each lane contributed."""
        ranks: dict[str, dict[str, int]] = {}
        fuse_rrf({"a": ["x", "x", "y"], "b": ["y"]}, ranks_out=ranks)
        assert ranks == {"x": {"a": 1}, "y": {"a": 2, "b": 1}}

    def test_empty_rankings(self) -> None:
        """No lanes give no scores."""
        assert fuse_rrf({}) == {}


class TestRrfCeiling:
    def test_ceiling_is_rank_one_everywhere(self) -> None:
        """The ceiling equals the score of an item ranked first in every lane."""
        w = {"a": 1.0, "b": 0.5}
        assert rrf_ceiling(w.values()) == pytest.approx(fuse_rrf({"a": ["x"], "b": ["x"]}, weights=w)["x"])

    def test_negative_weights_ignored(self) -> None:
        """Negative weights do not lower the ceiling."""
        assert rrf_ceiling([1.0, -1.0]) == 1 / 61
