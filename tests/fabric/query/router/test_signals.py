"""Tests for the probe signals: skewness against scipy.stats.skew, semantic distance, the five floats."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fabric.query.router.signals import SIGNAL_NAMES, ProbeSignals, compute_signals, semantic_distance, skewness

scores = st.lists(st.floats(min_value=-1.0, max_value=1.0, allow_nan=False, width=64), min_size=1, max_size=50)


class TestSkewness:
    @settings(max_examples=300, deadline=None)
    @given(scores)
    def test_matches_scipy_where_scipy_is_defined(self, values: list[float]) -> None:
        """Biased Fisher-Pearson skewness as scipy.stats.skew computes it; 0.0 where scipy gives NaN or inf."""
        with warnings.catch_warnings():  # scipy warns (then returns NaN) on nearly identical scores
            warnings.simplefilter("ignore", RuntimeWarning)
            expected = float(stats.skew(np.asarray(values)))
        got = skewness(values)
        if not math.isfinite(expected):
            assert got == 0.0
        else:
            assert got == pytest.approx(expected, rel=1e-9, abs=1e-9)

    def test_known_values(self) -> None:
        """A long right tail is positive, its mirror negative, symmetric is zero."""
        tail = [0.9, 0.5, 0.45, 0.44, 0.43, 0.42, 0.41, 0.40, 0.40, 0.39]
        assert skewness(tail) == pytest.approx(float(stats.skew(tail)))
        assert skewness(tail) > 1.0
        assert skewness([-x for x in tail]) == pytest.approx(-skewness(tail))
        assert skewness([0.1, 0.2, 0.3]) == pytest.approx(0.0, abs=1e-12)

    def test_constant_and_empty_scores_are_zero(self) -> None:
        """scipy returns NaN for a flat list; the router needs a number."""
        assert skewness([0.7] * 10) == 0.0
        assert skewness([0.7]) == 0.0
        assert skewness([]) == 0.0


class TestSemanticDistance:
    def test_same_direction_is_zero_and_orthogonal_is_one(self) -> None:
        """1 − cos(query, centroid)."""
        assert semantic_distance([1.0, 0.0], [[2.0, 0.0], [1.0, 0.0]]) == pytest.approx(0.0)
        assert semantic_distance([1.0, 0.0], [[0.0, 1.0], [0.0, 3.0]]) == pytest.approx(1.0)

    def test_centroid_not_mean_of_cosines(self) -> None:
        """Two documents 90° apart around the query: the centroid points at the query (45° each side)."""
        d = semantic_distance([1.0, 1.0], [[1.0, 0.0], [0.0, 1.0]])
        assert d == pytest.approx(0.0, abs=1e-12)

    def test_no_documents_or_zero_vector_is_one(self) -> None:
        """Nothing retrieved: as far as it gets."""
        assert semantic_distance([1.0, 0.0], []) == 1.0
        assert semantic_distance([0.0, 0.0], [[1.0, 0.0]]) == 1.0


class TestComputeSignals:
    def test_five_floats_in_seed_order(self) -> None:
        """max, min, mean, skew, dist."""
        s = compute_signals([0.9, 0.6, 0.3], [1.0, 0.0], [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
        assert (s.max, s.min) == (0.9, 0.3)
        assert s.mean == pytest.approx(0.6)
        assert s.skew == pytest.approx(float(stats.skew([0.9, 0.6, 0.3])), abs=1e-12)
        assert s.dist == pytest.approx(1 - 2 / math.sqrt(5))
        assert list(s.to_dict()) == list(SIGNAL_NAMES)
        assert ProbeSignals.from_mapping(s.to_dict()) == s

    def test_distance_not_computed(self) -> None:
        """The heuristic's signals carry no distance: they round-trip as null, and the classifier's vector refuses
        them rather than feed it a made-up value."""
        s = ProbeSignals(max=0.9, min=0.3, mean=0.6, skew=0.1, dist=None)
        assert s.to_dict()["dist"] is None
        assert ProbeSignals.from_mapping(s.to_dict()) == s
        with pytest.raises(ValueError, match="distance was not computed"):
            s.vector()
        with pytest.raises(ValueError, match="score statistic"):
            ProbeSignals.from_mapping({**s.to_dict(), "max": None})

    def test_empty_probe(self) -> None:
        """No hits: zeros and the largest distance."""
        assert compute_signals([], [1.0], []).vector() == [0.0, 0.0, 0.0, 0.0, 1.0]

    def test_no_query_vector_gives_distance_one(self) -> None:
        """Without an embedder the distance cannot be measured."""
        assert compute_signals([0.5, 0.4], None, []).dist == 1.0
