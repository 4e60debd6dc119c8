"""Ingestion tasks shared by the replicas of ``fabric serve`` (``FABRIC_STATE_URL`` set): one queue per tenant in
PostgreSQL (:class:`fabric.serve.tasks.postgres.SharedTaskStore`) or, for replicas on one host, in a shared SQLite file
(:class:`fabric.serve.state.local.LocalTaskStore`) instead of ``<home>/tasks.sqlite``.

Same records, idempotency and spooling as :class:`fabric.serve.tasks.queue.IngestTasks` (this class extends it); what
changes is who runs a task:

- a task submitted through any replica is in the shared table at once, so every replica answers
  ``GET /v1/ingest/<id>`` with its state; the runner saves its progress every :data:`HEARTBEAT_S` seconds;
- each replica's worker polls (every ``ingest.replica_poll_s``, or at once after a local submit) for the
  tenant's *writer lock*; its holder claims the tenant's tasks in queue order and runs them one at a time, so
  a task runs exactly once and a tenant's ingests never interleave, whichever replica took them;
- when a replica dies (``kill -9``, host gone) the database drops its lock; the next replica to take it finds
  the task still ``running``, repairs the tenant's stores from the ledger (the pending writes of the dead run
  are rolled back, :mod:`fabric.ingest.check`) and runs it again (at most :data:`~fabric.serve.tasks.queue.MAX_ATTEMPTS`
  runs); an entry list's body is written back to the spool from the database when the file is missing;
- a runner checks its lock on every heartbeat and abandons the run when the lock's connection is gone; its late
  writes to the record are fenced off (a record only takes saves from the replica that claimed it);
- the start-up repair of a tenant's stores runs only under the writer lock (:meth:`SharedIngestTasks.exclusive`),
  so a replica starting never rolls back the writes of another replica's running task.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from prometheus_client import CollectorRegistry

from fabric.core.cancel import cancel_and_wait
from fabric.core.logs import get_logger
from fabric.serve.tasks.queue import IngestTasks, Runner
from fabric.serve.tasks.store import DEFAULT_TENANT, IngestTask, TaskBackend, TaskStatus
from fabric.serve.tasks.submission import Submission
from fabric.settings.sections import IngestConfig

if TYPE_CHECKING:
    from fabric.serve.state.base import ReplicaState

__all__ = ["HEARTBEAT_S", "SPOOL_GRACE_S", "ReplicaTaskStore", "SharedIngestTasks", "replica_name"]


class ReplicaTaskStore(TaskBackend, Protocol):
    """One tenant's shared task queue: the task store's interface plus the writer lock, the claim and the
    submission mutex (:class:`fabric.serve.tasks.postgres.SharedTaskStore` documents them). Methods block."""

    def try_writer(self) -> bool: ...
    def writer_alive(self) -> bool: ...
    def release_writer(self) -> None: ...
    def claim(self) -> IngestTask | None: ...
    def lock_key(self, key: str) -> Any: ...
    def unlock_key(self, lock: Any, key: str) -> None: ...


log = get_logger(__name__)

HEARTBEAT_S = 1.0
"""How often a running task's progress is saved and its writer lock checked."""
SPOOL_GRACE_S = 600.0
"""Spool files younger than this are kept at start-up (another replica may be submitting them)."""

T = TypeVar("T")


def replica_name() -> str:
    """This process's name on the tasks it runs: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class SharedIngestTasks(IngestTasks):
    """One tenant's ingestion tasks in the shared database (see the module docstring).

    Args:
        config: the ``[ingest]`` settings.
        home: the tenant's home (spool files; replicas share it, see ``docs/replicas.md``).
        runner: runs the pipeline for one task.
        root: resolved allowed root for path submissions, or None.
        state: the replica's pools (opened).
        tenant: whose tasks.
        owner: this replica's name (:func:`replica_name`).
        repair: repairs the tenant's stores from the ledger (before a task a dead replica left is resumed).
        registry: as for :class:`~fabric.serve.tasks.queue.IngestTasks`.
        poll_s: the idle poll interval (default ``ingest.replica_poll_s``).
    """

    def __init__(
        self,
        config: IngestConfig,
        *,
        home: Path,
        runner: Runner,
        root: Path | None,
        state: ReplicaState,
        tenant: str = DEFAULT_TENANT,
        owner: str,
        repair: Callable[[], Awaitable[object]] | None = None,
        registry: CollectorRegistry | None = None,
        poll_s: float | None = None,
    ) -> None:
        super().__init__(config, home=home, runner=runner, root=root, registry=registry, tenant=tenant)
        self.state = state
        self.owner = owner
        self.repair = repair
        self.poll_s = poll_s if poll_s is not None else config.replica_poll_s
        self.taken_over = 0
        """Tasks of a dead replica this one resumed."""
        self._writing = asyncio.Lock()
        """Held while this replica holds the writer lock (its worker, or :meth:`exclusive`)."""
        self._away: tuple[type[BaseException], ...] = (*state.errors, OSError)
        """What a poll of an unreachable state raises (logged; the worker polls again)."""
        self._lost: tuple[type[BaseException], ...] = (asyncio.CancelledError, *state.errors)
        """What a run cut off by a lost writer lock (or a failing state) ends with."""

    def _open_store(self) -> TaskBackend:
        return self.state.task_store(self.tenant, self.owner)

    @property
    def shared(self) -> ReplicaTaskStore:
        """The shared task store (:meth:`_open_store` builds one)."""
        return self.store  # type: ignore[return-value]

    # ------------------------------------------------------------------ lifecycle and queries

    async def recover(self) -> dict[str, int]:
        """Nothing to queue locally (the worker claims from the database); old orphan spool files go."""
        removed = await asyncio.to_thread(self._clean_spool)
        return {"resumed": 0, "failed": 0, "spool_removed": removed}

    def _clean_spool(self) -> int:
        if not self.spool_dir.is_dir():
            return 0
        keep = self.store.spooled() | {str(t.source_path) for t in self._live.values()}
        cutoff, removed = time.time() - SPOOL_GRACE_S, 0
        for path in sorted(self.spool_dir.rglob("*"), reverse=True):
            if path.is_dir():
                with contextlib.suppress(OSError):
                    path.rmdir()
            elif str(path) not in keep and path.stat().st_mtime < cutoff:
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    def get(self, task_id: str) -> IngestTask | None:
        """The task running here, else the shared record (blocking: handlers use :meth:`aget`)."""
        running = self._running
        if running is not None and running.id == task_id:
            return running
        return self.store.get(task_id)

    async def aget(self, task_id: str) -> IngestTask | None:
        """The task's state, from whichever replica runs it."""
        running = self._running
        if running is not None and running.id == task_id:
            return running
        return await asyncio.to_thread(self.store.get, task_id)

    async def wait(self, task: IngestTask) -> IngestTask:
        """``task`` once it finished on any replica (polling the record), or when the service stops."""
        while not task.done.is_set():
            record = await asyncio.to_thread(self.store.get, task.id)
            if record is None or record.finished:
                return record or task
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_s):  # not wait_for: see _work
                    await task.done.wait()
        return task

    @property
    def idle(self) -> bool:
        """No task submitted here is waiting or running here."""
        return self._running is None and not self._live

    async def _backlog(self) -> int:
        return (await asyncio.to_thread(self.store.counts))[TaskStatus.QUEUED.value]

    async def submit(
        self, sub: Submission, *, key: str | None = None, tenant: str = DEFAULT_TENANT
    ) -> tuple[IngestTask, bool]:
        """As :meth:`IngestTasks.submit`, holding the idempotency key's mutex across the replicas (the task
        belongs to this queue's tenant: ``tenant`` is ignored)."""
        ikey = f"key:{key}" if key else f"sha256:{sub.fingerprint}"
        taking = asyncio.ensure_future(asyncio.to_thread(self.shared.lock_key, ikey))
        try:
            conn = await asyncio.shield(taking)
        except asyncio.CancelledError:  # the thread still takes the mutex: give it back once it has
            taking.add_done_callback(lambda f: self._give_back(f, ikey))
            raise
        try:
            return await super().submit(sub, key=key, tenant=self.tenant)
        finally:
            await asyncio.to_thread(self.shared.unlock_key, conn, ikey)

    def _give_back(self, taken: asyncio.Future[Any], ikey: str) -> None:
        """Release a submission mutex whose taker was cancelled (a short blocking call, rare)."""
        if not taken.cancelled() and taken.exception() is None:
            self.shared.unlock_key(taken.result(), ikey)

    async def exclusive(self, job: Callable[[], Awaitable[T]]) -> T | None:
        """Run ``job`` under the tenant's writer lock; None (not run) while another replica, or this replica's
        worker, holds it."""
        if self._writing.locked():
            return None
        async with self._writing:
            if not await asyncio.to_thread(self.shared.try_writer):
                return None
            try:
                return await job()
            finally:
                await asyncio.to_thread(self.shared.release_writer)

    # ------------------------------------------------------------------ worker

    async def _work(self) -> None:
        while True:
            try:
                ran = await self._drain()
            except self._away as exc:  # the database is away: keep polling
                log.warning("shared_tasks_unavailable", tenant=self.tenant, error=str(exc))
                ran = False
            if not ran:
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns the item and drops the
                # cancellation when aclose cancels the worker just as a submit wakes it, and aclose waits forever
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.poll_s):
                        await self._queue.get()
                while not self._queue.empty():
                    self._queue.get_nowait()

    async def _drain(self) -> bool:
        """Run the tenant's unfinished tasks while holding its writer lock; whether any ran."""
        store = self.shared
        async with self._writing:
            if not await asyncio.to_thread(store.try_writer):
                return False
            ran = False
            try:
                while (task := await asyncio.to_thread(store.claim)) is not None:
                    ran = True
                    await self._take(task)
            finally:
                await asyncio.to_thread(store.release_writer)
            return ran

    async def _take(self, claimed: IngestTask) -> None:
        task = self._live.get(claimed.id, claimed)
        task.status, task.attempts = claimed.status, claimed.attempts
        if task.status is TaskStatus.RUNNING:  # its runner died: undo its half-done writes first
            self.taken_over += 1
            log.warning("ingest_task_taken_over", task_id=task.id, tenant=self.tenant, attempts=task.attempts)
            if self.repair is not None:
                await self.repair()
        reason = await self._resumable(task)
        if reason is not None:
            self._live.pop(task.id, None)
            await self._finish(task, TaskStatus.FAILED, error=reason)
            return
        self._running = task
        run = asyncio.create_task(self._run(task), name=f"ingest-{task.id}")
        beat = asyncio.create_task(self._heartbeat(task, run), name=f"ingest-beat-{task.id}")
        try:
            await run
        except self._lost:
            if not beat.done() or beat.cancelled() or not beat.result():
                raise  # the worker itself is stopping (or the database failed while it was)
            log.error("ingest_run_abandoned", task_id=task.id, reason="writer lock lost")
        finally:
            self._running = None
            await cancel_and_wait(beat)

    async def _heartbeat(self, task: IngestTask, run: asyncio.Task[None]) -> bool:
        """Save the running task's progress every :data:`HEARTBEAT_S`; cancel the run (True) when the lock is lost."""
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            if not await asyncio.to_thread(self.shared.writer_alive):
                run.cancel()
                return True
            with contextlib.suppress(*self.state.errors):
                await asyncio.to_thread(self.store.save, task)
