"""Retries of a lane call: only on :class:`~fabric.core.errors.LaneUnavailable`, only within budget.

A retry needs both time (more than 5 ms left before the lane's cut) and a token from the provider's retry
budget (:meth:`fabric.query.penalties.ProviderPenalties.try_acquire_retry`: a share of recent attempts), so
retries cannot amplify an outage. ``LaneRejected`` (auth, quota, 429) and every other error are never
retried. The first attempt is a plain await; tenacity only runs once a retry is actually wanted.
"""

from __future__ import annotations

import asyncio

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    stop_any,
    wait_exponential,
)
from tenacity.stop import stop_base

from fabric.core.errors import LaneUnavailable
from fabric.core.models import Hit, LaneRequest
from fabric.query.penalties import ProviderPenalties
from lanes.base import Lane

__all__ = ["RetryBudgetStop", "search_with_retries"]

_MIN_LEFT_S = 0.005


class RetryBudgetStop(stop_base):
    """Stop retrying when the lane's time is (nearly) up or the provider's retry budget is spent.

    Args:
        penalties: where the provider's retry budget lives.
        provider: the provider to draw from.
        cut_at: the lane's cut (loop time).
    """

    def __init__(self, penalties: ProviderPenalties, provider: str, cut_at: float) -> None:
        self.penalties = penalties
        self.provider = provider
        self.cut_at = cut_at

    def __call__(self, retry_state: RetryCallState | None) -> bool:
        """True to stop; otherwise one retry token has been taken."""
        if self.cut_at - asyncio.get_running_loop().time() < _MIN_LEFT_S:
            return True
        return not self.penalties.try_acquire_retry(self.provider)


async def search_with_retries(
    lane: Lane, request: LaneRequest, *, cut_at: float, max_attempts: int, penalties: ProviderPenalties
) -> list[Hit]:
    """``lane.search(request)``, retried on ``LaneUnavailable`` while time and the retry budget allow.

    The caller cuts the whole call at ``cut_at``; this only decides whether another attempt is worth starting.
    """
    try:
        return list(await lane.search(request))
    except LaneUnavailable:
        stop = RetryBudgetStop(penalties, lane.provider, cut_at)
        if max_attempts < 2 or stop(None):
            raise
    retrying = AsyncRetrying(
        retry=retry_if_exception_type(LaneUnavailable),
        stop=stop_any(stop_after_attempt(max_attempts - 1), stop),
        wait=wait_exponential(multiplier=0.002, max=0.02),
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            return list(await lane.search(request))
    raise AssertionError("unreachable")  # pragma: no cover
