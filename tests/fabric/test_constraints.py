"""Tests for constraint binding."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fabric.constraints import bind_constraints
from fabric.models import Constraints, PreflightResult

NOW = datetime(2026, 6, 1, tzinfo=UTC)


class TestBindConstraints:
    def test_no_constraints_is_neutral(self) -> None:
        """Unset constraints bind to no bounds and multiplier 1."""
        b = bind_constraints(Constraints(), now=NOW)
        assert (b.date_from, b.date_to, b.max_results, b.budget_multiplier, b.search_depth) == (
            None,
            None,
            None,
            1.0,
            1,
        )

    def test_recent_is_two_years(self) -> None:
        """time_range=recent bounds dates to the last two years from now."""
        b = bind_constraints(Constraints(time_range="recent"), now=NOW)
        assert b.date_to == NOW
        assert b.date_from == NOW - timedelta(days=730)

    def test_all_time_has_no_bounds(self) -> None:
        """time_range=all_time sets no date bounds."""
        b = bind_constraints(Constraints(time_range="all_time"), now=NOW)
        assert b.date_from is None
        assert b.date_to is None

    def test_sources_become_preferred_domains(self) -> None:
        """sources=academic prefers academic domains instead of editing the query."""
        assert "edu" in bind_constraints(Constraints(sources="academic"), now=NOW).preferred_domains

    def test_cost_scales_budget_and_results(self) -> None:
        """cost low/high give multipliers 0.5/2.0 and max results 10/50."""
        low = bind_constraints(Constraints(cost="low"), now=NOW)
        high = bind_constraints(Constraints(cost="high"), now=NOW)
        assert (low.budget_multiplier, low.max_results) == (0.5, 10)
        assert (high.budget_multiplier, high.max_results) == (2.0, 50)

    def test_depth_sets_search_depth(self) -> None:
        """depth research gives 3 hops and 50 results."""
        b = bind_constraints(Constraints(depth="research"), now=NOW)
        assert (b.search_depth, b.max_results) == (3, 50)

    def test_cost_and_depth_take_the_smaller_limit(self) -> None:
        """With cost and depth both set, the tighter max_results wins."""
        assert bind_constraints(Constraints(cost="low", depth="research"), now=NOW).max_results == 10

    def test_citations_carried(self) -> None:
        """citations_required is carried through."""
        assert bind_constraints(Constraints(citations_required=True), now=NOW).citations_required

    def test_preflight_years_sites_phrases_merged(self) -> None:
        """Pre-flight years become date bounds; sites and phrases are copied."""
        pf = PreflightResult(bypassed=False, years=(2019, 2021), sites=("arxiv.org",), phrases=("deep learning",))
        b = bind_constraints(Constraints(), now=NOW, preflight=pf)
        assert b.date_from == datetime(2019, 1, 1, tzinfo=UTC)
        assert b.date_to is not None
        assert b.date_to.year == 2021
        assert b.sites == ("arxiv.org",)
        assert b.phrases == ("deep learning",)

    def test_years_intersect_time_range(self) -> None:
        """Query years and time_range intersect when they overlap."""
        pf = PreflightResult(bypassed=False, years=(2020, 2030))
        b = bind_constraints(Constraints(time_range="recent"), now=NOW, preflight=pf)
        assert b.date_from == NOW - timedelta(days=730)
        assert b.date_to == NOW

    def test_disjoint_years_win_over_time_range(self) -> None:
        """When they do not overlap, the query's explicit years win."""
        pf = PreflightResult(bypassed=False, years=(2001, 2002))
        b = bind_constraints(Constraints(time_range="recent"), now=NOW, preflight=pf)
        assert b.date_from is not None
        assert b.date_from.year == 2001

    def test_bypassed_preflight_ignored(self) -> None:
        """A bypassed pre-flight contributes nothing."""
        pf = PreflightResult(bypassed=True, reason="disabled", years=(2019, 2021), sites=("x.org",))
        b = bind_constraints(Constraints(), now=NOW, preflight=pf)
        assert b.date_from is None
        assert b.sites == ()
