"""Ingestion tasks of the HTTP service (``POST /v1/ingest``): an in-memory task table, a queue, one worker.

Submissions are validated (and entries spooled) by :mod:`fabric.ingest.submission`. Tasks run one at a time, in
submission order, on one worker task of the service's event loop; the pipeline
(:func:`fabric.ingest.pipeline.ingest`) embeds and touches SQLite in worker threads, so the loop keeps serving
searches. Records live in memory only: the last ``ingest.history`` finished tasks are kept, and every record is
lost when the process exits (re-submitting is then safe: the pipeline is idempotent).

Idempotency: a submission is keyed by its ``Idempotency-Key`` header, else by the sha256 of its canonical
body. A key that names a queued, running or succeeded task returns that task instead of starting another;
a failed task is replaced by a new one (that is what a retry is for). Without a header, a ``path`` submission
only matches a queued or running task, because the files may have changed since. A header reused with a
different body is refused (422). A task *succeeds* when the pipeline finished and every store took its
writes; a store that failed makes the task fail with the report attached (a retry repairs the store).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

from fabric.audit import Actor, acting_as
from fabric.config import IngestConfig
from fabric.errors import FabricError
from fabric.ingest.pipeline import IngestReport, Progress
from fabric.ingest.submission import SPOOL_NAME, Submission, SubmitError, spool_entries

__all__ = ["STAGES", "IngestTask", "IngestTasks", "Runner", "StageProgress", "TaskStatus"]

log = structlog.get_logger(__name__)

STAGES = ("load", "chunk", "embed", "write")
"""Pipeline stages whose progress a task reports."""

_STOPPED = "the service stopped before the task finished"

Runner = Callable[[Path, str | None, Progress], Awaitable[IngestReport]]
"""Runs the pipeline on a source (path, format) with a progress sink; the service binds its stores."""


class TaskStatus(StrEnum):
    """Life cycle of a task."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


@dataclass(slots=True)
class StageProgress:
    """Units done out of the stage's total (0/0 until the stage starts; a stage with no work stays 0/0)."""

    done: int = 0
    total: int = 0


@dataclass(slots=True, kw_only=True)
class IngestTask:
    """One ingestion task and its record."""

    id: str
    """Random hex id, the handle of ``GET /v1/ingest/<id>``."""
    key: str
    """Idempotency key: ``key:<header>`` or ``sha256:<body hash>``."""
    submission: Submission
    """What to ingest."""
    source_path: Path
    """What the pipeline reads (the spool file for entries)."""
    status: TaskStatus = TaskStatus.QUEUED
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    started_at: datetime | None = None
    finished_at: datetime | None = None
    progress: dict[str, StageProgress] = field(default_factory=lambda: {s: StageProgress() for s in STAGES})
    """Per-stage progress, updated by the pipeline as it goes."""
    report: dict[str, Any] | None = None
    """``IngestReport.to_dict()`` (the ``fabric ingest --json`` summary) once the pipeline finished."""
    error: str | None = None
    """Why the task failed."""
    conflicts: dict[str, str] | None = None
    """Ids another source already holds, with that source, when the task failed on them (HTTP 409)."""
    done: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the task has finished (either way)."""

    @property
    def finished(self) -> bool:
        """Whether the task succeeded or failed."""
        return self.status in (TaskStatus.SUCCEEDED, TaskStatus.FAILED)

    def to_dict(self) -> dict[str, Any]:
        """The JSON record answered by the API."""
        sub = self.submission

        def ts(t: datetime | None) -> str | None:
            return t.isoformat().replace("+00:00", "Z") if t is not None else None

        return {
            "task_id": self.id,
            "status": self.status.value,
            "status_url": f"/v1/ingest/{self.id}",
            "source": {
                "kind": sub.kind,
                "entries": sub.count if sub.kind == "entries" else None,
                "path": sub.requested_path or None,
                "format": sub.fmt,
            },
            "idempotency": "key" if self.key.startswith("key:") else "content",
            "created_at": ts(self.created_at),
            "started_at": ts(self.started_at),
            "finished_at": ts(self.finished_at),
            "progress": {name: {"done": p.done, "total": p.total} for name, p in self.progress.items()},
            "report": self.report,
            "error": self.error,
            **({"conflicts": self.conflicts} if self.conflicts else {}),
        }


class _TaskProgress(Progress):
    """Feeds the pipeline's stage/advance calls into a task's record."""

    def __init__(self, task: IngestTask) -> None:
        self.task = task

    def stage(self, name: str, total: int) -> None:
        self.task.progress[name] = StageProgress(done=0, total=total)

    def advance(self, name: str, n: int) -> None:
        self.task.progress.setdefault(name, StageProgress()).done += n


class IngestTasks:
    """The in-memory task table, the queue and its single worker (see the module docstring).

    Args:
        config: the ``[ingest]`` settings.
        home: store root; entries are spooled under ``<home>/spool/``.
        runner: runs the pipeline for one task.
        root: resolved allowed root for path submissions (:func:`resolve_root`), or None.
        registry: Prometheus registry for ``fabric_ingest_tasks_total{status}`` (finished tasks),
            ``fabric_ingest_entries_total`` (entries of succeeded tasks) and ``fabric_ingest_tasks_pending``
            (queued + running); the service passes the engine's, so ``/metrics`` shows them.
    """

    def __init__(
        self,
        config: IngestConfig,
        *,
        home: Path,
        runner: Runner,
        root: Path | None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.config = config
        self.runner = runner
        self.root = root
        self.spool_dir = home / "spool"
        self._tasks: OrderedDict[str, IngestTask] = OrderedDict()
        self._by_key: dict[str, IngestTask] = {}
        self._spool_refs: dict[Path, int] = {}
        self._queue: asyncio.Queue[IngestTask] = asyncio.Queue()
        self._lock = asyncio.Lock()
        self._worker: asyncio.Task[None] | None = None
        self._running: IngestTask | None = None
        r = registry or CollectorRegistry()
        self._finished_total = Counter("fabric_ingest_tasks", "Ingestion tasks finished", ["status"], registry=r)
        self._entries_total = Counter("fabric_ingest_entries", "Entries of succeeded ingestion tasks", registry=r)
        pending = Gauge("fabric_ingest_tasks_pending", "Ingestion tasks queued or running", registry=r)
        pending.set_function(lambda: self._queue.qsize() + (self._running is not None))

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start the worker (idempotent)."""
        if self._worker is None:
            self._worker = asyncio.create_task(self._work(), name="ingest-worker")

    async def aclose(self) -> None:
        """Stop the worker; unfinished tasks are recorded as failed."""
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker
        for task in list(self._tasks.values()):
            if not task.finished:  # still queued (the running one was failed by its cancellation)
                await self._release(task.source_path)
                self._finish(task, TaskStatus.FAILED, error=_STOPPED)

    # ------------------------------------------------------------------ queries

    def get(self, task_id: str) -> IngestTask | None:
        """The task with this id, if its record is still kept."""
        return self._tasks.get(task_id)

    @property
    def idle(self) -> bool:
        """No task is queued or running."""
        return self._running is None and self._queue.empty()

    def counts(self) -> dict[str, int]:
        """Kept task records by status."""
        out = {s.value: 0 for s in TaskStatus}
        for task in self._tasks.values():
            out[task.status.value] += 1
        return out

    # ------------------------------------------------------------------ submit

    def _reusable(self, task: IngestTask, sub: Submission, header: bool) -> bool:
        if task.status in (TaskStatus.QUEUED, TaskStatus.RUNNING):
            return True
        return task.status is TaskStatus.SUCCEEDED and (header or sub.kind == "entries")

    async def submit(self, sub: Submission, *, key: str | None = None) -> tuple[IngestTask, bool]:
        """Queue ``sub`` as a task, or return the task that already holds its idempotency key.

        Returns:
            The task and whether it was created by this call.

        Raises:
            SubmitError: a header key reused with another body (422), a full queue (503), or entries the
                loader refuses (400).
        """
        ikey = f"key:{key}" if key else f"sha256:{sub.fingerprint}"
        async with self._lock:
            existing = self._by_key.get(ikey)
            if existing is not None:
                if key and existing.submission.fingerprint != sub.fingerprint:
                    raise SubmitError("Idempotency-Key", "already used with a different body", status=422)
                if self._reusable(existing, sub, header=bool(key)):
                    return existing, False
            if self._queue.qsize() >= self.config.max_queued:
                raise SubmitError("queue", f"{self.config.max_queued} ingestion tasks already queued", status=503)
            if sub.kind == "entries":
                source = self.spool_dir / sub.fingerprint[:32] / SPOOL_NAME
                self._spool_refs[source] = self._spool_refs.get(source, 0) + 1
                try:
                    await asyncio.to_thread(spool_entries, sub, source)
                except BaseException:
                    await self._release(source)
                    raise
            else:
                assert sub.path is not None
                source = sub.path
            # the spool file holds the entries from now on: the record keeps only their count
            task = IngestTask(id=uuid.uuid4().hex, key=ikey, submission=replace(sub, entries=()), source_path=source)
            self._tasks[task.id] = task
            self._by_key[ikey] = task
            self._queue.put_nowait(task)
            self._evict()
        log.info("ingest_task_queued", task_id=task.id, kind=sub.kind, entries=sub.count, key=ikey[:4])
        return task, True

    def _evict(self) -> None:
        """Drop the oldest finished records beyond ``history`` (unfinished ones are never dropped)."""
        finished = [t for t in self._tasks.values() if t.finished]
        for task in finished[: max(0, len(finished) - self.config.history)]:
            del self._tasks[task.id]
            if self._by_key.get(task.key) is task:
                del self._by_key[task.key]

    # ------------------------------------------------------------------ worker

    async def _work(self) -> None:
        while True:
            task = await self._queue.get()
            if task.finished:  # failed while queued (shutdown)
                continue
            self._running = task
            try:
                await self._run(task)
            finally:
                self._running = None

    async def _run(self, task: IngestTask) -> None:
        task.status = TaskStatus.RUNNING
        task.started_at = datetime.now(UTC)
        log.info("ingest_task_started", task_id=task.id)
        status, report_dict = TaskStatus.FAILED, None
        error: str | None = _STOPPED  # until the runner returns or raises
        sub = task.submission
        try:
            with acting_as(Actor(tenant=sub.tenant, key_id=sub.key_id, task_id=task.id, via="api")):
                report = await self.runner(task.source_path, sub.fmt, _TaskProgress(task))
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
                status, error = TaskStatus.SUCCEEDED, None
        finally:  # also on cancellation (service shutdown): the spool goes before the task reads as finished
            try:
                await self._release(task.source_path)
            finally:
                self._finish(task, status, report=report_dict, error=error)

    def _public(self, message: str, task: IngestTask) -> str:
        """An error message without the server's absolute paths."""
        sub = task.submission
        shown = sub.requested_path if sub.kind == "path" else "entries"
        return message.replace(str(task.source_path), shown)

    def _finish(
        self, task: IngestTask, status: TaskStatus, *, report: dict[str, Any] | None = None, error: str | None = None
    ) -> None:
        task.status = status
        task.report = report
        task.error = error
        task.finished_at = datetime.now(UTC)
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
        self._evict()

    async def _release(self, source: Path) -> None:
        """Drop a spool reference; the last one removes the spool file."""
        if source not in self._spool_refs:
            return
        self._spool_refs[source] -= 1
        if self._spool_refs[source] > 0:
            return
        del self._spool_refs[source]

        def remove() -> None:
            source.unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # another spool file may share the folder
                source.parent.rmdir()

        await asyncio.to_thread(remove)
