"""Token buckets and the cursor secret in the shared database."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

import fabric.serve.state.shared as mod
from fabric.serve.state.postgres import SharedState
from fabric.serve.state.shared import SharedBuckets, shared_secret


@pytest.fixture
async def states(state_url: str) -> AsyncIterator[list[SharedState]]:
    """Two replicas' pools over one database."""
    pair = [SharedState(state_url), SharedState(state_url)]
    for s in pair:
        await s.open()
    try:
        yield pair
    finally:
        for s in pair:
            await s.aclose()


async def test_burst_is_shared_by_replicas(states: list[SharedState]) -> None:
    """A bucket of 10 at a slow refill grants about 10 requests in total to two replicas taking concurrently."""
    a, b = SharedBuckets(states[0].aio), SharedBuckets(states[1].aio)
    started = time.monotonic()
    waits = await asyncio.gather(*(x.take("tenant:acme", 1.0, 10) for _ in range(20) for x in (a, b)))
    elapsed = time.monotonic() - started
    granted = sum(1 for w in waits if w == 0.0)
    assert 10 <= granted <= 10 + int(elapsed * 1.0) + 1, (granted, elapsed)
    refused = [w for w in waits if w > 0.0]
    assert refused
    assert all(0.0 < w <= 1.0 for w in refused)  # at most one refill interval away


async def test_buckets_are_per_name(states: list[SharedState]) -> None:
    """Another tenant's bucket is full while the first is empty."""
    buckets = SharedBuckets(states[0].aio)
    assert [await buckets.take("tenant:a", 0.001, 1) for _ in range(2)][1] > 0.0
    assert await buckets.take("tenant:b", 0.001, 1) == 0.0


async def test_secret_is_one_for_every_replica(states: list[SharedState]) -> None:
    """Replicas asking at once get one secret per name; names differ."""
    got = await asyncio.gather(*(shared_secret(s.aio, "cursor:default") for s in states for _ in range(3)))
    assert len(set(got)) == 1
    assert len(got[0]) == 64
    assert await shared_secret(states[0].aio, "cursor:acme") != got[0]


def test_public_api() -> None:
    """The module exports the buckets and the secret."""
    assert set(mod.__all__) == {"SharedBuckets", "shared_secret"}
