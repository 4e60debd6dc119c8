"""Stopping a background task without losing a cancellation, the caller's or the task's.

Two ways a stop used to wait forever or ignore its caller (Python 3.11):

- ``with contextlib.suppress(asyncio.CancelledError): await task`` after ``task.cancel()`` also eats a
  cancellation *of the caller* (a timeout around the stop, a shutdown), so the caller carries on as if it had
  not been cancelled. :func:`cancel_and_wait` re-raises when the caller itself is being cancelled.
- ``asyncio.wait_for(queue.get(), t)`` returns the item and drops the cancellation when the task is cancelled
  just as the item arrives (``wait_for`` checks the inner future first); a worker looping on it then never
  ends and its stop waits forever. Background loops use ``async with asyncio.timeout(t)`` instead, which keeps
  the cancellation.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["cancel_and_wait"]


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait until it has ended.

    The task's own :class:`asyncio.CancelledError` is the expected end and is not raised; any other exception it
    ends with is. When the caller is cancelled while it waits (or was already being cancelled), the caller's
    cancellation is raised, not swallowed.
    """
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
