"""The lanes' worker threads, and how long each lane call really ran in them (:class:`CallClock`).

A lane call's wall time is not the store's time. Under load a local store's call first waits for a worker
thread, for the query encoder's current batch, or for the busy event loop to resume it; only then does the store
work. Charging that wall time to the store's health made a burst of queries open every local store's
circuit breaker. So the executor gives every lane call a :class:`CallClock` (through a context variable), and:

- :class:`LanePool`, the loop's default executor (installed by :func:`fabric.query.bulkhead.reserve_threads`), times
  each job submitted on behalf of a clock: the wait for a thread (``queued_s``) and the run (``worked_s``), less
  the time the job's thread waited for a CPU core (Linux ``schedstat``: a machine busy with other work starves
  the store, the store is not slow);
- the query encoder's micro-batcher (:class:`fabric.embed.query_batch.QueryBatcher`) marks a caller's clock while the
  caller waits for a batch (:func:`note_pending`). An in-process model's batch is a shared local resource, so
  waiting for it is waiting; a remote embedder's batch runs under the clocks of the queries it encodes
  (:func:`running_for`) and counts as their work.

:meth:`CallClock.charged_ms` is then the time the store (or a remote model encoding its query) actually worked.
A call that never used a worker thread (an HTTP lane, an in-memory lane) is charged its wall time, as before.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from typing import ParamSpec, TypeVar

__all__ = [
    "CallClock",
    "LanePool",
    "context_for",
    "current_clocks",
    "is_lane_pool",
    "note_pending",
    "run_queue_s",
    "running_for",
]

P = ParamSpec("P")
T = TypeVar("T")

_JOBS = itertools.count()
_CLOCKS: contextvars.ContextVar[tuple[CallClock, ...]] = contextvars.ContextVar("fabric_call_clocks", default=())


class CallClock:
    """Worker time of one lane call: jobs submitted, time they waited for a thread, time they ran.

    Updated from worker threads (under a lock) and read on the event loop. Times are ``time.monotonic()`` seconds,
    the event loop's clock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.jobs = 0
        """Jobs submitted on behalf of the call (thread jobs and encodings waited for)."""
        self.queued_s = 0.0
        """Time its jobs waited for a worker thread or an encoder batch."""
        self.worked_s = 0.0
        """Time its finished jobs ran."""
        self._running: dict[int, tuple[float, int | None, float | None]] = {}

    def submitted(self) -> None:
        """A job was submitted (it counts even before a thread picks it up)."""
        with self._lock:
            self.jobs += 1

    def waited(self, seconds: float) -> None:
        """Add time spent waiting before a job could run."""
        with self._lock:
            self.queued_s += max(0.0, seconds)

    def started(self, job: int, now: float, *, tid: int | None = None, runq_s: float | None = None) -> None:
        """Job ``job`` started running at ``now`` on thread ``tid``, whose run-queue wait was ``runq_s`` then."""
        with self._lock:
            self._running[job] = (now, tid, runq_s)

    def finished(self, job: int, now: float, *, runq_s: float | None = None) -> None:
        """Job ``job`` ended at ``now``; its thread's run-queue wait is then ``runq_s``."""
        with self._lock:
            start, _tid, runq0 = self._running.pop(job, (now, None, None))
            self.worked_s += _ran(start, now, runq0, runq_s)

    def work_s(self, now: float | None = None) -> float:
        """Time the call's jobs ran, those still running counted up to ``now``."""
        now = time.monotonic() if now is None else now
        with self._lock:
            running = list(self._running.values())
            worked = self.worked_s
        return worked + sum(_ran(start, now, runq0, run_queue_s(tid)) for start, tid, runq0 in running)

    def charged_ms(self, wall_ms: float) -> float:
        """What the call costs its provider: the jobs' run time, or ``wall_ms`` for a call that used no thread."""
        if not self.jobs:
            return wall_ms
        return min(wall_ms, self.work_s() * 1000.0)


def _ran(start: float, end: float, runq0: float | None, runq1: float | None) -> float:
    """A job's time from ``start`` to ``end`` less the time its thread waited for a CPU core meanwhile."""
    starved = runq1 - runq0 if runq0 is not None and runq1 is not None else 0.0
    return max(0.0, end - start - max(0.0, starved))


class _StatFile:
    """This thread's ``/proc/thread-self/schedstat``, opened once and re-read with ``pread`` (closed with it)."""

    __slots__ = ("fd",)

    def __init__(self) -> None:
        self.fd: int | None = None
        with suppress(OSError):
            self.fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)

    def __del__(self) -> None:
        if self.fd is not None:
            os.close(self.fd)


_THIS_THREAD = threading.local()


def run_queue_s(tid: int | None = None) -> float | None:
    """Seconds the thread ``tid`` (default: the calling thread) has waited for a core since it started: the
    second field of Linux's ``schedstat``; None where it cannot be read.

    The calling thread's file stays open (read twice per lane job: an open and a close cost 15 µs, a ``pread``
    1 µs); another thread's is opened for the one read.
    """
    try:
        if tid is None:
            stat = getattr(_THIS_THREAD, "stat", None)
            if stat is None:
                stat = _THIS_THREAD.stat = _StatFile()
            if stat.fd is None:
                return None
            raw = os.pread(stat.fd, 128, 0).decode("ascii")
        else:
            with open(f"/proc/self/task/{tid}/schedstat", encoding="ascii") as f:
                raw = f.read()
        return int(raw.split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def current_clocks() -> tuple[CallClock, ...]:
    """The clocks of the lane call running in this context (empty outside a lane call)."""
    return _CLOCKS.get()


@contextmanager
def running_for(clocks: tuple[CallClock, ...]) -> Iterator[None]:
    """Jobs submitted inside the block run on behalf of ``clocks`` (replacing the context's own)."""
    token = _CLOCKS.set(clocks)
    try:
        yield
    finally:
        _CLOCKS.reset(token)


def context_for(clocks: tuple[CallClock, ...]) -> contextvars.Context:
    """A copy of the current context in which jobs run on behalf of ``clocks`` (for a lane call's task)."""
    context = contextvars.copy_context()
    context.run(_CLOCKS.set, clocks)
    return context


def note_pending(clocks: tuple[CallClock, ...]) -> float:
    """Mark a job the callers of ``clocks`` wait for (an encoding); returns the time to pass to ``waited``."""
    for clock in clocks:
        clock.submitted()
    return time.monotonic()


class LanePool(ThreadPoolExecutor):
    """A thread pool that times the jobs submitted on behalf of lane calls (see the module docstring)."""

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """Submit ``fn``; when a lane call's clock is current, the job's wait and run are added to it."""
        clocks = _CLOCKS.get()
        if not clocks:
            return super().submit(fn, *args, **kwargs)
        for clock in clocks:
            clock.submitted()
        submitted = time.monotonic()

        def timed() -> T:
            start, runq0, tid = time.monotonic(), run_queue_s(), threading.get_native_id()
            job = next(_JOBS)
            for clock in clocks:
                clock.waited(start - submitted)
                clock.started(job, start, tid=tid, runq_s=runq0)
            try:
                return fn(*args, **kwargs)
            finally:
                end, runq1 = time.monotonic(), run_queue_s()
                for clock in clocks:
                    clock.finished(job, end, runq_s=runq1)

        return super().submit(timed)


def is_lane_pool(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop``'s default executor is a :class:`LanePool` (its lane calls' thread time is measured)."""
    # asyncio has no public getter for the default executor (fabric.query.bulkhead.reserve_threads sets it).
    return isinstance(getattr(loop, "_default_executor", None), LanePool)
