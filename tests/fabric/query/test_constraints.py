"""Tests for constraint binding."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fabric.core.models import Constraints, PreflightResult
from fabric.query.constraints import bind_constraints

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

    def test_sources_bind_a_filter_except_both(self) -> None:
        """academic and news bind their source filter; both and unset bind none."""
        academic = bind_constraints(Constraints(sources="academic"), now=NOW).source_filter
        news = bind_constraints(Constraints(sources="news"), now=NOW).source_filter
        assert academic is not None
        assert academic.name == "academic"
        assert "edu" in academic.domains
        assert news is not None
        assert news.name == "news"
        assert "reuters.com" in news.domains
        assert bind_constraints(Constraints(sources="both"), now=NOW).source_filter is None
        assert bind_constraints(Constraints(), now=NOW).source_filter is None

    def test_cost_binds_a_token_budget(self) -> None:
        """cost low/medium/high bind 1000/2000/5000 tokens (seed 003); unset binds none."""
        tokens = [bind_constraints(Constraints(cost=c), now=NOW).max_tokens for c in ("low", "medium", "high")]
        assert tokens == [1000, 2000, 5000]
        assert bind_constraints(Constraints(), now=NOW).max_tokens is None

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

    def test_preflight_years_are_soft_query_years(self) -> None:
        """Years pre-flight inferred from the text become the soft ``query_years``, never hard date bounds."""
        pf = PreflightResult(bypassed=False, years=(2021, 2019))
        b = bind_constraints(Constraints(), now=NOW, preflight=pf)
        assert (b.query_years, b.date_from, b.date_to) == ((2019, 2021), None, None)

    def test_preflight_sites_and_phrases_copied(self) -> None:
        """``site:`` domains and quoted phrases are copied from pre-flight."""
        pf = PreflightResult(bypassed=False, sites=("arxiv.org",), phrases=("deep learning",))
        b = bind_constraints(Constraints(), now=NOW, preflight=pf)
        assert (b.sites, b.phrases) == (("arxiv.org",), ("deep learning",))

    def test_time_range_stays_hard_next_to_query_years(self) -> None:
        """An explicit time_range keeps its hard date bounds when the query also names years."""
        pf = PreflightResult(bypassed=False, years=(2001, 2002))
        b = bind_constraints(Constraints(time_range="recent"), now=NOW, preflight=pf)
        assert (b.date_from, b.date_to, b.query_years) == (NOW - timedelta(days=730), NOW, (2001, 2002))

    def test_bypassed_preflight_ignored(self) -> None:
        """A bypassed pre-flight contributes nothing."""
        pf = PreflightResult(bypassed=True, reason="disabled", years=(2019, 2021), sites=("x.org",))
        b = bind_constraints(Constraints(), now=NOW, preflight=pf)
        assert b.date_from is None
        assert b.query_years is None
        assert b.sites == ()


class TestLiteralBinding:
    """``[engine] all_time_years`` and ``source_binding = "sites"``: seed 003's ConstraintBinder as written."""

    def test_all_time_is_the_last_ten_years(self) -> None:
        """get_date_from: 365 × 10 days back from now; 0 (the default) binds no date."""
        from fabric.settings import EngineConfig

        b = bind_constraints(Constraints(time_range="all_time"), now=NOW, engine=EngineConfig(all_time_years=10))
        assert (b.date_from, b.date_to) == (NOW - timedelta(days=3650), NOW)
        recent = bind_constraints(Constraints(time_range="recent"), now=NOW, engine=EngineConfig(all_time_years=10))
        assert recent.date_from == NOW - timedelta(days=730)  # the other ranges are unchanged

    def test_sources_keep_the_site_modifier_domains(self) -> None:
        """apply_source_constraints' site: domains, nothing else (no imported corpora, no news-feed lanes)."""
        from fabric.settings import EngineConfig

        sites = EngineConfig(source_binding="sites")
        academic = bind_constraints(Constraints(sources="academic"), now=NOW, engine=sites).source_filter
        news = bind_constraints(Constraints(sources="news"), now=NOW, engine=sites).source_filter
        assert academic is not None
        assert news is not None
        assert (academic.domains, academic.kinds, academic.lane_kinds) == (
            ("edu", "ac.uk", "scholar.google.com"),
            (),
            (),
        )
        assert (news.domains, news.kinds, news.lane_kinds) == (("news.google.com", "reuters.com", "bbc.com"), (), ())
        assert bind_constraints(Constraints(sources="both"), now=NOW, engine=sites).source_filter is None
