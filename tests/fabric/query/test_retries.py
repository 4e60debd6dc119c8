"""Tests for fabric.query.retries: only LaneUnavailable is retried, and only while time and the retry budget allow."""

from __future__ import annotations

import asyncio

import pytest

from fabric.core.errors import LaneRejected, LaneUnavailable
from fabric.core.models import Hit, LaneRequest
from fabric.query.penalties import ProviderPenalties
from fabric.query.retries import RetryBudgetStop, search_with_retries
from fabric.settings import PenaltyConfig
from lanes.fake import FakeLane, synthetic_hits

REQUEST = LaneRequest(query="q")


class FailingLane(FakeLane):
    """Raises ``errors`` in turn (one per call), then answers three hits; counts its calls."""

    def __init__(self, *errors: Exception) -> None:
        super().__init__(name="flaky")
        self.errors = list(errors)
        self.calls = 0

    async def search(self, request: LaneRequest) -> list[Hit]:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return synthetic_hits(self.name, 3)


def penalties(ratio: float = 0.1) -> ProviderPenalties:
    return ProviderPenalties(PenaltyConfig(retry_budget_ratio=ratio))


def far_cut() -> float:
    return asyncio.get_running_loop().time() + 10.0


class TestSearchWithRetries:
    async def test_first_answer_needs_no_retry(self) -> None:
        """A healthy lane is called once."""
        lane = FailingLane()
        hits = await search_with_retries(lane, REQUEST, cut_at=far_cut(), max_attempts=3, penalties=penalties())
        assert [h.id for h in hits] == ["flaky-0", "flaky-1", "flaky-2"]
        assert lane.calls == 1

    async def test_unavailable_is_retried_once_with_budget(self) -> None:
        """One LaneUnavailable, a retry token available: the second attempt answers."""
        lane = FailingLane(LaneUnavailable("503"))
        hits = await search_with_retries(lane, REQUEST, cut_at=far_cut(), max_attempts=3, penalties=penalties())
        assert len(hits) == 3
        assert lane.calls == 2

    async def test_rejected_is_never_retried(self) -> None:
        """LaneRejected (auth, quota, 429) propagates after one call."""
        lane = FailingLane(LaneRejected("429"))
        with pytest.raises(LaneRejected):
            await search_with_retries(lane, REQUEST, cut_at=far_cut(), max_attempts=3, penalties=penalties())
        assert lane.calls == 1

    async def test_other_errors_are_never_retried(self) -> None:
        """A bug in the adapter is not a reason to call it again."""
        lane = FailingLane(ValueError("bug"))
        with pytest.raises(ValueError, match="bug"):
            await search_with_retries(lane, REQUEST, cut_at=far_cut(), max_attempts=3, penalties=penalties())
        assert lane.calls == 1

    async def test_single_attempt_disables_retries(self) -> None:
        """``max_attempts=1`` re-raises the first LaneUnavailable."""
        lane = FailingLane(LaneUnavailable("503"))
        with pytest.raises(LaneUnavailable):
            await search_with_retries(lane, REQUEST, cut_at=far_cut(), max_attempts=1, penalties=penalties())
        assert lane.calls == 1

    async def test_no_retry_without_time_left(self) -> None:
        """With the cut already passed, the LaneUnavailable is re-raised without a second call."""
        lane = FailingLane(LaneUnavailable("503"))
        cut = asyncio.get_running_loop().time()
        with pytest.raises(LaneUnavailable):
            await search_with_retries(lane, REQUEST, cut_at=cut, max_attempts=3, penalties=penalties())
        assert lane.calls == 1

    async def test_spent_retry_budget_stops_retries(self) -> None:
        """Once the provider's retry budget is spent, an outage is not amplified by more calls."""
        pen = penalties(ratio=0.1)
        lane = FailingLane(LaneUnavailable("503"))
        assert pen.try_acquire_retry(lane.provider)  # the one retry a fresh provider may take, now spent
        with pytest.raises(LaneUnavailable):
            await search_with_retries(lane, REQUEST, cut_at=far_cut(), max_attempts=3, penalties=pen)
        assert lane.calls == 1

    async def test_attempts_are_capped(self) -> None:
        """Repeated LaneUnavailable stops after ``max_attempts`` calls even with a generous budget."""
        lane = FailingLane(*(LaneUnavailable("503") for _ in range(5)))
        with pytest.raises(LaneUnavailable):
            await search_with_retries(lane, REQUEST, cut_at=far_cut(), max_attempts=3, penalties=penalties(ratio=10))
        assert lane.calls == 3


class TestRetryBudgetStop:
    async def test_takes_a_token_when_it_lets_a_retry_through(self) -> None:
        """Each ``False`` (go on) spends one token; the next call finds the budget spent."""
        pen = penalties(ratio=0.1)
        stop = RetryBudgetStop(pen, "p", far_cut())
        assert stop(None) is False
        assert stop(None) is True
