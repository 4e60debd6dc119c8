"""cancel_and_wait: the task ends, its cancellation is not raised, the caller's is."""

from __future__ import annotations

import asyncio

import pytest

from fabric.core.cancel import cancel_and_wait


async def _forever() -> None:
    await asyncio.Event().wait()


async def test_the_task_is_cancelled_and_ended() -> None:
    task = asyncio.create_task(_forever())
    await asyncio.sleep(0)
    await cancel_and_wait(task)
    assert task.cancelled()


async def test_a_cancellation_of_the_caller_is_raised_not_swallowed() -> None:
    """The caller is cancelled while the task still cleans up: the caller ends cancelled (the old
    ``suppress(CancelledError)`` let it return as if nothing happened)."""
    cleaning = asyncio.Event()

    async def slow_to_stop() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cleaning.set()
            await asyncio.sleep(5)
            raise

    task = asyncio.create_task(slow_to_stop())
    await asyncio.sleep(0)
    stopper = asyncio.create_task(cancel_and_wait(task))
    await cleaning.wait()
    stopper.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopper
    assert stopper.cancelled()
    assert task.done()


async def test_another_error_of_the_task_is_raised() -> None:
    async def fails_on_stop() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise RuntimeError("cleanup failed") from None

    task = asyncio.create_task(fails_on_stop())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="cleanup failed"):
        await cancel_and_wait(task)
