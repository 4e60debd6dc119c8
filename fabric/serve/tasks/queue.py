"""Ingestion tasks of the HTTP service (``POST /v1/ingest``): a durable task table, a queue, one worker.

Submissions are validated (and entries spooled) by :mod:`fabric.serve.tasks.submission`. Tasks run one at a time, in
submission order, on one worker task of the service's event loop; the pipeline embeds and touches SQLite in
worker threads, so the loop keeps serving searches. Records, queue order, idempotency keys and spooled bodies live
in ``<home>/tasks.sqlite`` (:mod:`fabric.serve.tasks.store`), or, for replicas, in their shared database
(:mod:`fabric.serve.tasks.shared`); the last ``ingest.history`` finished tasks are kept.

Restart: :meth:`IngestTasks.start` resumes every task a stop or crash interrupted, in queue order. A task that was
running when the process died is run again (the pipeline is idempotent, and the service has reconciled the stores
first, :mod:`fabric.ingest.check`) unless its runs were interrupted :data:`MAX_ATTEMPTS` times, then it fails
with that reason; an entry task whose body was lost fails saying so. Spool files no unfinished task needs are
removed. A task id from before the restart answers its real state. A clean stop leaves unfinished tasks queued.

Idempotency: a submission is keyed by its ``Idempotency-Key`` header, else by the sha256 of its canonical body,
per tenant. A key naming a queued, running or succeeded task returns that task; a failed task is replaced by a
new one (a retry). Without a header, a ``path`` submission only matches a queued or running task (the files may
have changed). A header reused with a different body is refused (409). A task *succeeds* when the pipeline
finished and every store took its writes; a store that failed fails the task with the report attached.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge

from fabric.core.cancel import cancel_and_wait
from fabric.core.errors import FabricError
from fabric.core.logs import get_logger
from fabric.ingest.audit import Actor, acting_as
from fabric.ingest.crashpoints import crash_point
from fabric.ingest.report import IngestReport, Progress
from fabric.serve.tasks.store import (
    DEFAULT_TENANT,
    STAGES,
    TASKS_FILE,
    IngestTask,
    StageProgress,
    TaskBackend,
    TaskStatus,
    TaskStore,
)
from fabric.serve.tasks.submission import SPOOL_NAME, Submission, SubmitError, spool_entries
from fabric.settings import IngestConfig

__all__ = ["MAX_ATTEMPTS", "STAGES", "IngestTask", "IngestTasks", "Runner", "StageProgress", "TaskStatus"]

log = get_logger(__name__)

MAX_ATTEMPTS = 3
"""Runs of one task a crash may interrupt before the task fails instead of being resumed again."""

_LOST = "the spooled entries were lost while the service was down; submit them again"

T = TypeVar("T")

Runner = Callable[[Path, str | None, Progress], Awaitable[IngestReport]]
"""Runs the pipeline on a source (path, format) with a progress sink; the service binds its stores."""


class _TaskProgress(Progress):
    """Feeds the pipeline's stage/advance calls into a task's record."""

    def __init__(self, task: IngestTask) -> None:
        self.task = task

    def stage(self, name: str, total: int) -> None:
        self.task.progress[name] = StageProgress(done=0, total=total)

    def advance(self, name: str, n: int) -> None:
        self.task.progress.setdefault(name, StageProgress()).done += n


class IngestTasks:
    """The durable task table, the queue and its single worker (see the module docstring).

    Args:
        config: the ``[ingest]`` settings.
        home: store root; tasks are recorded in ``<home>/tasks.sqlite``, entries spooled under ``<home>/spool/``.
        runner: runs the pipeline for one task.
        root: resolved allowed root for path submissions (:func:`resolve_root`), or None.
        registry: Prometheus registry for ``fabric_ingest_tasks_total{status}`` (finished tasks),
            ``fabric_ingest_entries_total`` (entries of succeeded tasks) and ``fabric_ingest_tasks_pending``
            (queued + running); the service passes the engine's, so ``/metrics`` shows them.
        tenant: whose stores the runner writes: the tasks run, and are audited, as this tenant whichever door
            submitted them (the submission brings the key id).
    """

    def __init__(
        self,
        config: IngestConfig,
        *,
        home: Path,
        runner: Runner,
        root: Path | None,
        registry: CollectorRegistry | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> None:
        self.config = config
        self.tenant = tenant
        self.runner = runner
        self.root = root
        self.spool_dir = home / "spool"
        self._store_path = home / TASKS_FILE
        self._store: TaskBackend | None = None
        self._live: dict[str, IngestTask] = {}
        """Queued and running tasks (the objects the worker updates); finished ones are read from the store."""
        self._queue: asyncio.Queue[IngestTask] = asyncio.Queue()
        self._lock = asyncio.Lock()
        self._worker: asyncio.Task[None] | None = None
        self._running: IngestTask | None = None
        r = registry or CollectorRegistry()
        self._finished_total = Counter("fabric_ingest_tasks", "Ingestion tasks finished", ["status"], registry=r)
        self._entries_total = Counter("fabric_ingest_entries", "Entries of succeeded ingestion tasks", registry=r)
        pending = Gauge("fabric_ingest_tasks_pending", "Ingestion tasks queued or running", registry=r)
        pending.set_function(lambda: self._queue.qsize() + (self._running is not None))

    @property
    def store(self) -> TaskBackend:
        """The task store (opened on first use)."""
        if self._store is None:
            self._store = self._open_store()
        return self._store

    def _open_store(self) -> TaskBackend:
        return TaskStore(self._store_path)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> dict[str, int]:
        """Resume interrupted tasks (:meth:`recover`) and start the worker (idempotent).

        Returns:
            What the recovery did (empty when already started).
        """
        if self._worker is not None:
            return {}
        await asyncio.to_thread(lambda: self.store)
        recovered = await self.recover()
        self._worker = asyncio.create_task(self._work(), name="ingest-worker")
        return recovered

    async def recover(self) -> dict[str, int]:
        """Queue again every unfinished task of the store, fail those that cannot resume, clean the spool."""
        counts = {"resumed": 0, "failed": 0, "spool_removed": 0}
        for task in await asyncio.to_thread(self.store.unfinished):
            if task.id in self._live:
                continue
            reason = await self._resumable(task)
            if reason is not None:
                await self._finish(task, TaskStatus.FAILED, error=reason)
                counts["failed"] += 1
                continue
            if task.status is TaskStatus.RUNNING:
                log.warning("ingest_task_resumed", task_id=task.id, attempts=task.attempts)
                counts["resumed"] += 1
            task.status = TaskStatus.QUEUED
            await asyncio.to_thread(self.store.save, task)
            self._live[task.id] = task
            self._queue.put_nowait(task)
        counts["spool_removed"] = await asyncio.to_thread(self._clean_spool)
        if any(counts.values()):
            log.info("ingest_tasks_recovered", **counts)
        return counts

    async def _resumable(self, task: IngestTask) -> str | None:
        """Why ``task`` cannot be resumed (None when it can); writes its spool file again from the store."""
        if task.status is TaskStatus.RUNNING and task.attempts >= MAX_ATTEMPTS:
            return (
                f"interrupted {task.attempts} times while running (the service stopped or crashed); not resumed "
                "again: submit it again to retry"
            )
        if task.submission.kind != "entries" or task.source_path.is_file():
            return None
        body = await asyncio.to_thread(self.store.body, task.source_path)
        if body is None:
            return _LOST

        def rewrite(data: bytes) -> None:
            task.source_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = task.source_path.with_name(f".{task.source_path.name}.{uuid.uuid4().hex}")
            tmp.write_bytes(data)
            tmp.replace(task.source_path)

        await asyncio.to_thread(rewrite, body)
        return None

    def _clean_spool(self) -> int:
        """Remove spool files (and empty folders) that no unfinished task needs; how many files went."""
        if not self.spool_dir.is_dir():
            return 0
        keep = self.store.spooled() | {str(t.source_path) for t in self._live.values()}
        removed = 0
        for path in sorted(self.spool_dir.rglob("*"), reverse=True):  # files before their folders
            if path.is_dir():
                with contextlib.suppress(OSError):
                    path.rmdir()
            elif str(path) not in keep:
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    async def aclose(self) -> None:
        """Stop the worker; unfinished tasks stay queued in the store and resume at the next start."""
        worker, self._worker = self._worker, None
        if worker is not None:
            await cancel_and_wait(worker)
        for task in list(self._live.values()):
            task.done.set()  # wake inline waiters: they answer the task as still queued
        self._live.clear()
        self._queue = asyncio.Queue()
        store, self._store = self._store, None
        if store is not None:
            await asyncio.to_thread(store.close)

    def get(self, task_id: str) -> IngestTask | None:
        """The task with this id, while its record is kept (across restarts)."""
        live = self._live.get(task_id)
        if live is not None:
            return live
        return self.store.get(task_id)

    async def aget(self, task_id: str) -> IngestTask | None:
        """:meth:`get` for handlers (a shared store is read in a worker thread)."""
        return self.get(task_id)

    async def wait(self, task: IngestTask) -> IngestTask:
        """``task`` once it finished (or the service stopped), as recorded."""
        await task.done.wait()
        return task

    async def exclusive(self, job: Callable[[], Awaitable[T]]) -> T | None:
        """Run ``job`` while no task of this queue can run elsewhere (here: at once; replicas: under a lock)."""
        return await job()

    async def _backlog(self) -> int:
        """Tasks queued (the ``ingest.max_queued`` cap counts them)."""
        return self._queue.qsize()

    @property
    def idle(self) -> bool:
        """No task is queued or running (a task whose status is final counts as done while its record is saved)."""
        return (self._running is None or self._running.finished) and self._queue.empty()

    def counts(self) -> dict[str, int]:
        """Kept task records by status."""
        return self.store.counts()

    def _reusable(self, task: IngestTask, sub: Submission, header: bool) -> bool:
        if task.status in (TaskStatus.QUEUED, TaskStatus.RUNNING):
            return True
        return task.status is TaskStatus.SUCCEEDED and (header or sub.kind == "entries")

    async def _existing(self, tenant: str, ikey: str) -> IngestTask | None:
        for task in self._live.values():
            if task.key == ikey and task.tenant == tenant:
                return task
        return await asyncio.to_thread(self.store.by_key, tenant, ikey)

    async def submit(
        self, sub: Submission, *, key: str | None = None, tenant: str = DEFAULT_TENANT
    ) -> tuple[IngestTask, bool]:
        """Queue ``sub`` as a task, or return the task that already holds its idempotency key.

        Returns:
            The task and whether it was created by this call.

        Raises:
            SubmitError: a header key reused with another body (409), a full queue (503), or entries the
                loader refuses (400).
        """
        ikey = f"key:{key}" if key else f"sha256:{sub.fingerprint}"
        async with self._lock:
            existing = await self._existing(tenant, ikey)
            if existing is not None:
                if key and existing.submission.fingerprint != sub.fingerprint:
                    raise SubmitError("Idempotency-Key", "already used with a different body", status=409)
                if self._reusable(existing, sub, header=bool(key)):
                    return existing, False
            if await self._backlog() >= self.config.max_queued:
                raise SubmitError("queue", f"{self.config.max_queued} ingestion tasks already queued", status=503)
            body: Path | None = None
            if sub.kind == "entries":
                source = self.spool_dir / sub.fingerprint[:32] / SPOOL_NAME
                try:
                    await asyncio.to_thread(spool_entries, sub, source)
                    crash_point("spool")
                    body = source  # the store copies it in pieces, never whole in memory
                except BaseException:
                    await self._release(source)
                    raise
            else:
                assert sub.path is not None
                source = sub.path
            # the spool file (and the store) hold the entries from now on: the record keeps only their count
            task = IngestTask(
                id=uuid.uuid4().hex, key=ikey, submission=replace(sub, entries=()), source_path=source, tenant=tenant
            )
            await asyncio.to_thread(self.store.add, task, body)
            self._live[task.id] = task
            self._queue.put_nowait(task)
        log.info("ingest_task_queued", task_id=task.id, kind=sub.kind, entries=sub.count, key=ikey[:4])
        return task, True

    async def _work(self) -> None:
        while True:
            task = await self._queue.get()
            if task.finished:
                continue
            self._running = task
            try:
                await self._run(task)
            finally:
                self._running = None

    async def _run(self, task: IngestTask) -> None:
        task.status = TaskStatus.RUNNING
        task.started_at = datetime.now(UTC)
        task.attempts += 1
        task.progress = {s: StageProgress() for s in STAGES}
        await asyncio.to_thread(self.store.save, task)
        log.info("ingest_task_started", task_id=task.id, attempt=task.attempts)
        status, report_dict = TaskStatus.FAILED, None
        error: str | None = None
        sub = task.submission
        try:
            with acting_as(Actor(self.tenant, sub.key_id, task_id=task.id, via="api", role=sub.role)), sub.allowlist():
                report = await self.runner(task.source_path, sub.fmt, _TaskProgress(task))
        except asyncio.CancelledError:  # a clean stop: the task stays queued and resumes at the next start
            task.status = TaskStatus.QUEUED
            task.attempts -= 1
            self.store.save(task)
            raise
        except (FabricError, OSError) as exc:
            error = self._public(str(exc), task)
            task.conflicts = getattr(exc, "taken", None)
        except Exception as exc:  # the worker must survive any task: log the traceback, record the failure
            log.exception("ingest_task_crashed", task_id=task.id)
            error = f"internal error: {type(exc).__name__}"
        else:
            report_dict = report.to_dict()
            report_dict["source"] = task.submission.requested_path or f"entries:{task.submission.fingerprint[:16]}"
            bad = {k: v for k, v in report.stores.items() if v != "ok"}
            if bad:  # a failed store leaves chunks unheld; a retry (new task) repairs them
                error = "store(s) failed: " + "; ".join(f"{k}: {v}" for k, v in sorted(bad.items()))
            else:
                status = TaskStatus.SUCCEEDED
        # the spool goes before the task reads as finished (a crash in between: the restart writes it again)
        self._live.pop(task.id, None)
        await self._release(task.source_path)
        await self._finish(task, status, report=report_dict, error=error)

    def _public(self, message: str, task: IngestTask) -> str:
        """An error message without the server's absolute paths."""
        sub = task.submission
        shown = sub.requested_path if sub.kind == "path" else "entries"
        return message.replace(str(task.source_path), shown)

    async def _finish(
        self, task: IngestTask, status: TaskStatus, *, report: dict[str, Any] | None = None, error: str | None = None
    ) -> None:
        task.status = status
        task.report = report
        task.error = error
        task.finished_at = datetime.now(UTC)
        await asyncio.to_thread(self.store.save, task)
        await asyncio.to_thread(self.store.evict, self.config.history)
        task.done.set()
        self._finished_total.labels(status=status.value).inc()
        if status is TaskStatus.SUCCEEDED and task.report is not None:
            self._entries_total.inc(int(task.report.get("docs") or 0))
        started = task.started_at or task.finished_at
        log.info(
            "ingest_task_finished",
            task_id=task.id,
            status=status.value,
            seconds=round((task.finished_at - started).total_seconds(), 3),
            error=error,
        )

    async def _release(self, source: Path) -> None:
        """Remove a spool file once no queued or running task reads it."""
        if not source.is_relative_to(self.spool_dir) or any(t.source_path == source for t in self._live.values()):
            return

        def remove() -> None:
            source.unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # another spool file may share the folder
                source.parent.rmdir()

        await asyncio.to_thread(remove)
