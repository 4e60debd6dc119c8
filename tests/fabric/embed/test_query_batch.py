"""Micro-batched query encoding: concurrent queries share one model call, off the event loop."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

import fabric.embed.query_batch as qb
from fabric.core.errors import LaneUnavailable
from fabric.embed.embeddings import (
    CachedEmbedder,
    EmbeddingCache,
)
from fabric.embed.query_batch import QueryBatcher, encode_query, query_batcher
from tests.support.embedded import BagEmbedder


class SlowBag(BagEmbedder):
    """A bag embedder whose calls take a while (in the worker thread) and record their batches."""

    def __init__(self, delay_s: float = 0.05, fail: bool = False) -> None:
        super().__init__()
        self.delay_s = delay_s
        self.fail = fail
        self.batches: list[list[str]] = []

    def embed(self, texts):  # type: ignore[no-untyped-def]
        import time

        self.batches.append(list(texts))
        time.sleep(self.delay_s)
        if self.fail:
            raise LaneUnavailable("model down")
        return super().embed(texts)


class TestQueryBatcher:
    async def test_concurrent_queries_share_one_call(self) -> None:
        """The first query goes to the model at once; the four arriving with it while it runs share the next
        call, each getting its own vector."""
        emb = SlowBag()
        texts = [f"query {i}" for i in range(5)]
        got = await asyncio.gather(*(encode_query(emb, t) for t in texts))
        assert emb.batches == [texts[:1], texts[1:]]
        assert got == BagEmbedder().embed(texts)
        assert (query_batcher(emb).batches, query_batcher(emb).texts) == (2, 5)

    async def test_a_window_gathers_the_queries_arriving_within_it(self) -> None:
        """With ``window_s`` set, the queries of one window share one call."""
        emb = SlowBag()
        texts = [f"query {i}" for i in range(5)]
        batcher = QueryBatcher(emb, window_s=0.02)
        got = await asyncio.gather(*(batcher.encode(t) for t in texts))
        assert emb.batches == [texts]
        assert got == BagEmbedder().embed(texts)

    async def test_an_idle_batcher_calls_the_model_before_the_loop_moves_on(self) -> None:
        """Without a window, ``encode`` submits the model call before it first yields: a callback scheduled
        before the call finds the model entered (in a fused query the other lanes' first steps run next, and
        starting the encoding after them put it about 1 ms later on the query's slowest path)."""
        entered = threading.Event()

        class Marking(SlowBag):
            def embed(self, texts):  # type: ignore[no-untyped-def]
                entered.set()
                return super().embed(texts)

        batcher = QueryBatcher(Marking(delay_s=0.0))
        seen: list[bool] = []
        asyncio.get_running_loop().call_soon(lambda: seen.append(entered.wait(timeout=2.0)))
        await batcher.encode("a")
        assert seen == [True]

    async def test_arrivals_during_a_batch_form_the_next_one(self) -> None:
        """Queries arriving while a batch runs are batched together right after it."""
        emb = SlowBag(delay_s=0.1)
        first = asyncio.ensure_future(encode_query(emb, "a"))
        await asyncio.sleep(0.03)  # the first batch is in the model now
        later = await asyncio.gather(*(encode_query(emb, t) for t in ("b", "c", "d")))
        await first
        assert emb.batches == [["a"], ["b", "c", "d"]]
        assert len(later) == 3

    async def test_batch_size_is_capped(self) -> None:
        """No model call gets more than max_batch texts."""
        emb = SlowBag(delay_s=0.0)
        batcher = QueryBatcher(emb, max_batch=2)
        await asyncio.gather(*(batcher.encode(str(i)) for i in range(5)))
        assert [len(b) for b in emb.batches] == [1, 2, 2]

    async def test_a_pool_shut_down_fails_every_waiter_instead_of_leaving_it_waiting(self) -> None:
        """The worker pool shut down under the batcher (a loop closing): the lone query and the two that queued
        behind a call already running all get the pool's error; none is left waiting for a vector."""
        from concurrent.futures import ThreadPoolExecutor

        loop = asyncio.get_running_loop()
        pool = ThreadPoolExecutor(max_workers=1)
        loop.set_default_executor(pool)
        batcher = QueryBatcher(SlowBag(delay_s=0.05))
        first = asyncio.ensure_future(batcher.encode("a"))
        await asyncio.sleep(0.01)  # "a" is in the model; "b" and "c" queue behind it
        queued = [asyncio.ensure_future(batcher.encode(t)) for t in ("b", "c")]
        pool.shutdown(wait=False)
        assert len(await first) > 0
        results = await asyncio.wait_for(asyncio.gather(*queued, return_exceptions=True), timeout=5.0)
        assert all(isinstance(r, RuntimeError) for r in results)
        with pytest.raises(RuntimeError):
            await batcher.encode("d")

    async def test_errors_reach_every_waiter(self) -> None:
        """When the model fails, every query of the batch gets the error; the next batch runs again."""
        emb = SlowBag(delay_s=0.0, fail=True)
        batcher = QueryBatcher(emb)
        results = await asyncio.gather(batcher.encode("a"), batcher.encode("b"), return_exceptions=True)
        assert all(isinstance(r, LaneUnavailable) for r in results)
        emb.fail = False
        assert await batcher.encode("c") == BagEmbedder().embed(["c"])[0]

    async def test_a_cancelled_query_is_not_encoded(self) -> None:
        """A caller cancelled while waiting for the window drops out of the batch."""
        emb = SlowBag(delay_s=0.0)
        batcher = QueryBatcher(emb, window_s=0.05)
        gone = asyncio.ensure_future(batcher.encode("gone"))
        kept = asyncio.ensure_future(batcher.encode("kept"))
        await asyncio.sleep(0.01)
        gone.cancel()
        await kept
        assert emb.batches == [["kept"]]

    async def test_the_batch_is_timed_on_the_callers_clocks(self) -> None:
        """Each query's wait for its batch and the batch's model call land on that query's lane-call clock."""
        from fabric.core.lanepool import CallClock, LanePool, context_for

        loop = asyncio.get_running_loop()
        loop.set_default_executor(LanePool(max_workers=2))
        emb = SlowBag(delay_s=0.005)
        clocks = [CallClock(), CallClock()]
        tasks = [loop.create_task(encode_query(emb, f"q{i}"), context=context_for((c,))) for i, c in enumerate(clocks)]
        await asyncio.gather(*tasks)
        assert emb.batches == [["q0"], ["q1"]]  # q1 arrived while q0's call ran
        for clock in clocks:
            assert clock.jobs == 2  # the awaited encoding and the model call in a worker thread
            assert clock.worked_s > 0.0
            assert clock.queued_s > 0.0  # from joining the batch to its model call

    async def test_an_in_process_model_is_waiting_not_work(self) -> None:
        """A local model's batch is a shared resource: its time is the callers' wait, none of their work."""
        from fabric.core.lanepool import CallClock, LanePool, context_for

        loop = asyncio.get_running_loop()
        loop.set_default_executor(LanePool(max_workers=2))
        emb = SlowBag(delay_s=0.005)
        emb.in_process = True  # type: ignore[attr-defined]
        clock = CallClock()
        await loop.create_task(encode_query(emb, "q"), context=context_for((clock,)))
        assert (clock.jobs, clock.worked_s) == (1, 0.0)
        assert clock.queued_s > 0.0
        assert CachedEmbedder(emb, EmbeddingCache(Path("/nonexistent"), "m")).in_process

    async def test_one_batcher_per_embedder(self) -> None:
        """Each embedder gets its own batcher on the running loop."""
        a, b = BagEmbedder(), BagEmbedder()
        assert query_batcher(a) is query_batcher(a)
        assert query_batcher(a) is not query_batcher(b)


def test_public_api() -> None:
    """The module's public names."""
    assert sorted(qb.__all__) == ["QueryBatcher", "encode_query", "query_batcher"]
