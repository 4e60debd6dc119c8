"""Bulkheads: keep one hung provider from taking the worker threads every other lane needs.

A lane that hangs in a synchronous SDK call holds a worker thread even after the executor abandoned it, and
asyncio's stock thread pool is small (``min(32, cpus + 4)``: 6 on two cores). Three guards, per provider:

1. **Abandoned calls**: a provider with ``max_abandoned`` abandoned calls still running is not called again
   until one ends (the caller reports the lane as suspended, reason ``bulkhead``).
2. **Unproven concurrency**: a provider whose last outcome was not a success (new, failing, half-open, or
   with abandoned calls) gets at most ``unproven_concurrency`` calls in flight; further callers *wait* for a
   slot within their own budget instead of starting another call. A healthy provider answers, becomes
   proven, and the waiters proceed at once; a hung one keeps its few slots and the waiters time out without
   spawning threads. This is what protects the first wave of concurrent queries, before any penalty exists.
3. **Thread reserve**: :func:`reserve_threads` gives the loop a default pool of ``lane_threads`` workers, a
   :class:`~fabric.core.lanepool.LanePool` that times the jobs of lane calls (queue time is never charged to a store).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fabric.core.lanepool import LanePool
from fabric.core.logs import get_logger

__all__ = ["Bulkhead", "reserve_threads"]

log = get_logger(__name__)


def reserve_threads(workers: int) -> None:
    """Give the running loop a default :class:`~fabric.core.lanepool.LanePool` of at least ``workers`` threads (a
    larger pool keeps its size; a lane pool already big enough is kept)."""
    loop = asyncio.get_running_loop()
    # asyncio has no public getter for the default executor; the stock one is created lazily on first use.
    current = getattr(loop, "_default_executor", None)
    size = getattr(current, "_max_workers", 0)
    foreign = current is not None and not isinstance(current, ThreadPoolExecutor)
    if foreign or (isinstance(current, LanePool) and size >= workers):
        return
    pool = LanePool(max_workers=max(workers, size), thread_name_prefix="fabric-lane")
    loop.set_default_executor(pool)
    if isinstance(current, ThreadPoolExecutor):
        current.shutdown(wait=False)
    log.debug("lane_threads_reserved", workers=workers, replaced=size)


class Bulkhead:
    """Per-provider in-flight and abandoned-call accounting (owned by one executor).

    Args:
        max_abandoned: abandoned calls still running before a provider is refused.
        unproven_concurrency: calls in flight allowed to a provider whose last outcome was not a success.
        is_proven: provider → True when its last outcome was a success (from the penalties).
    """

    def __init__(self, *, max_abandoned: int, unproven_concurrency: int, is_proven: Callable[[str], bool]) -> None:
        if max_abandoned < 1 or unproven_concurrency < 1:
            raise ValueError("max_abandoned and unproven_concurrency must be >= 1")
        self.max_abandoned = max_abandoned
        self.unproven_concurrency = unproven_concurrency
        self.is_proven = is_proven
        self.abandoned: set[asyncio.Task[Any]] = set()
        self.abandoned_total = 0
        self._abandoned: dict[str, int] = {}
        self._inflight: dict[str, int] = {}
        self._freed: dict[str, asyncio.Event] = {}

    def refusal(self, provider: str) -> str | None:
        """Why ``provider`` must not be called now (too many abandoned calls), or None."""
        n = self._abandoned.get(provider, 0)
        if n >= self.max_abandoned:
            return f"bulkhead: {n} abandoned calls to {provider} still running"
        return None

    def inflight(self, provider: str) -> int:
        """Calls to ``provider`` not yet ended (abandoned ones included)."""
        return self._inflight.get(provider, 0)

    async def acquire(self, provider: str, deadline: float) -> bool:
        """Take a call slot, waiting (until ``deadline``, loop time) while the provider is unproven and full."""
        loop = asyncio.get_running_loop()
        while self._inflight.get(provider, 0) >= self.unproven_concurrency and not (
            self.is_proven(provider) and not self._abandoned.get(provider)
        ):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            event = self._freed.setdefault(provider, asyncio.Event())
            try:
                async with asyncio.timeout(remaining):
                    await event.wait()
            except TimeoutError:
                return False
        self._inflight[provider] = self._inflight.get(provider, 0) + 1
        return True

    def release(self, provider: str) -> None:
        """Give back a slot (when the call's task ends, even long after it was abandoned)."""
        self._inflight[provider] = max(0, self._inflight.get(provider, 1) - 1)
        event = self._freed.pop(provider, None)
        if event is not None:
            event.set()

    def abandon(self, task: asyncio.Task[Any], provider: str, on_change: Callable[[], None]) -> None:
        """Keep a reference to an abandoned call until it ends; ``on_change`` runs when the set changes."""
        self.abandoned.add(task)
        self.abandoned_total += 1
        self._abandoned[provider] = self._abandoned.get(provider, 0) + 1

        def _done(t: asyncio.Task[Any]) -> None:
            self.abandoned.discard(t)
            self._abandoned[provider] = max(0, self._abandoned.get(provider, 1) - 1)
            on_change()
            if not t.cancelled():
                t.exception()  # retrieve it, so asyncio does not report it as never retrieved

        task.add_done_callback(_done)
        on_change()
