"""Tests for budget lookup."""

from __future__ import annotations

from fabric.core.models import LaneKind
from fabric.query.budgets import lane_budget_ms, total_budget_ms
from fabric.settings import LaneConfig, ModeConfig

MODE = ModeConfig(total_budget_ms=7000, lanes={"keyword": 750, "special": 100})


class TestBudgets:
    def test_by_name(self) -> None:
        """A lane's own name wins."""
        assert lane_budget_ms(MODE, LaneConfig(name="special", kind=LaneKind.KEYWORD, backend="x")) == 100

    def test_by_kind(self) -> None:
        """A lane without its own entry uses its kind's budget."""
        assert lane_budget_ms(MODE, LaneConfig(name="kw2", kind=LaneKind.KEYWORD, backend="x")) == 750

    def test_fallback_to_total_and_multiplier(self) -> None:
        """An unlisted lane gets the total; the multiplier scales it."""
        assert lane_budget_ms(MODE, LaneConfig(name="n", kind=LaneKind.NEWS, backend="x"), 0.5) == 3500

    def test_request_budget_not_scaled(self) -> None:
        """An explicit request budget is used as given; the mode's is scaled."""
        assert total_budget_ms(MODE, 300.0, 2.0) == 300.0
        assert total_budget_ms(MODE, None, 2.0) == 14000
