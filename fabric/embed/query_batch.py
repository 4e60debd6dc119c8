"""Micro-batched query encoding.

Query encoding (:func:`encode_query`) goes through one :class:`QueryBatcher` per embedder and event loop: queries
arriving while a batch is being encoded (or within ``window_s`` when one is set) share one model call in a worker
thread, so concurrent queries do not each pay a forward pass and never block the event loop. A lone query does
not wait for company: an idle batcher (no window, the default) submits the model call inside ``encode`` itself,
and under load the queries arriving during one batch form the next, so a timed window would only add its length
to every query at concurrency 1. A query's wait for
its batch is waiting, its batch's model call is work, on the lane call's clock (:mod:`fabric.core.lanepool`).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fabric.core.lanepool import CallClock, current_clocks, note_pending, running_for
from fabric.core.logs import get_logger
from fabric.core.models import Embedder

__all__ = ["QueryBatcher", "encode_query", "query_batcher"]

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class _Batch:
    """One model call in flight and the queries it encodes."""

    live: list[_Pending]
    vectors: asyncio.Future[list[list[float]]]
    started: float


@dataclass(frozen=True, slots=True)
class _Pending:
    """One query waiting for its batch."""

    text: str
    future: asyncio.Future[list[float]]
    clocks: tuple[CallClock, ...]
    enqueued: float


class QueryBatcher:
    """Micro-batches query encodings of one embedder on one event loop (see the module docstring).

    Args:
        embedder: the (cached) embedder; its ``embed`` runs in a worker thread.
        window_s: how long the first query of a batch waits for others (0: none, the model is called at once).
        max_batch: most texts per model call.
    """

    def __init__(self, embedder: Embedder, *, window_s: float = 0.0, max_batch: int = 32) -> None:
        self.embedder = embedder
        self._embed: Callable[[Sequence[str]], list[list[float]]] = getattr(embedder, "embed_queries", embedder.embed)
        """The embedder's query path (:meth:`CachedEmbedder.embed_queries`), else its ``embed``."""
        self.in_process = bool(getattr(embedder, "in_process", False))
        """A model computed by this process (its batches are a shared local resource, not a lane's work)."""
        self.window_s = window_s
        self.max_batch = max_batch
        self.batches = 0
        """Model calls made (``texts / batches`` is the mean batch size)."""
        self.texts = 0
        self._pending: list[_Pending] = []
        self._task: asyncio.Task[None] | None = None

    async def encode(self, text: str) -> list[float]:
        """The vector of ``text``, encoded together with the queries arriving alongside it.

        With no batch in flight and no window, the model call is submitted here and now: a task would start it
        only after the other lanes' first steps (about 1 ms later in a fused query at concurrency 1, on the
        query's slowest path)."""
        future: asyncio.Future[list[float]] = asyncio.get_running_loop().create_future()
        clocks = current_clocks()  # the lane call's clock: its wait for a batch is not the store's time
        self._pending.append(_Pending(text, future, clocks, note_pending(clocks)))
        if self._task is None or self._task.done():
            started = None if self.window_s else self._start()
            self._task = asyncio.create_task(self._drain(started))
        return await future

    def _start(self) -> _Batch | None:
        """Submit the next batch's model call to the worker threads (None when every caller is gone)."""
        batch = self._pending[: self.max_batch]
        del self._pending[: self.max_batch]
        live = [p for p in batch if not p.future.done()]  # a cancelled caller is not encoded
        if not live:
            return None
        self.batches += 1
        self.texts += len(live)
        now = time.monotonic()
        for p in live:
            for clock in p.clocks:
                clock.waited(now - p.enqueued)
        # A remote model's call is the queries' work; an in-process model is a shared local resource, and
        # the time its batch takes is waiting for it (fabric.core.lanepool).
        clocks = () if self.in_process else tuple(c for p in live for c in p.clocks)
        texts = [p.text for p in live]
        try:
            with running_for(clocks):  # the pool reads the clocks when the job is submitted
                call = functools.partial(contextvars.copy_context().run, self._embed, texts)
                vectors = asyncio.get_running_loop().run_in_executor(None, call)
        except RuntimeError as exc:  # the pool is shut down (the loop is closing): every caller gets the error
            for p in live:
                if not p.future.done():
                    p.future.set_exception(exc)
            return None
        return _Batch(live, vectors, time.monotonic())

    async def _finish(self, batch: _Batch) -> None:
        """Hand each caller of ``batch`` its vector, or the embedder's error."""
        try:
            vectors = await batch.vectors
        except Exception as exc:  # every waiter gets the embedder's error
            for p in batch.live:
                if not p.future.done():
                    p.future.set_exception(exc)
            return
        finally:
            if self.in_process:
                for c in {c for p in batch.live for c in p.clocks}:
                    c.waited(time.monotonic() - batch.started)
        for p, vector in zip(batch.live, vectors, strict=True):
            if not p.future.done():
                p.future.set_result(vector)

    async def _drain(self, started: _Batch | None) -> None:
        if started is not None:
            await self._finish(started)
        elif self.window_s:
            await asyncio.sleep(self.window_s)
        while self._pending:  # what arrived during a batch forms the next one, without waiting again
            batch = self._start()
            if batch is not None:
                await self._finish(batch)


_BATCHERS: weakref.WeakKeyDictionary[Any, dict[asyncio.AbstractEventLoop, QueryBatcher]] = weakref.WeakKeyDictionary()


def query_batcher(embedder: Embedder) -> QueryBatcher:
    """The batcher of ``embedder`` on the running event loop (created on first use)."""
    loop = asyncio.get_running_loop()
    per_loop = _BATCHERS.setdefault(embedder, {})
    batcher = per_loop.get(loop)
    if batcher is None:
        for old in [lp for lp in per_loop if lp.is_closed()]:
            del per_loop[old]
        batcher = per_loop[loop] = QueryBatcher(embedder)
    return batcher


async def encode_query(embedder: Embedder, text: str) -> list[float]:
    """Encode one query off the event loop, micro-batched with concurrent queries of the same embedder.

    Raises:
        LaneUnavailable: the model cannot be loaded or the endpoint failed (whatever ``embed`` raises).
    """
    return await query_batcher(embedder).encode(text)
