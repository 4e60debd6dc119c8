"""What the service does with its home before it says ready, and what ``/readyz`` checks about it.

At start-up (:meth:`HomeGate.open`, before the ingestion worker starts and before ``/readyz`` is ready):

1. take the home's lock (:mod:`fabric.ingest.homelock`): a second service, or a service and a CLI ingest, never both
   write one home; the refused process names the holder's pid;
2. reconcile the stores with the ledger (:func:`fabric.ingest.check.check_stores` with ``repair``, the same repair
   as ``fabric check --repair``), so a crash during an ingest leaves no store disagreeing after the restart;
3. the same for every other tenant with a folder under the home
   (:meth:`fabric.serve.tenant_engines.TenantEngines.recover`, recorded here by :meth:`HomeGate.tenants_repaired`):
   a crash during one tenant's ingest leaves that tenant's stores repaired, and its tasks resumed, before
   ``/readyz`` says ready, not on that tenant's next request.

While serving, :meth:`HomeGate.ready` answers whether the stores can be written: the home and its store folders
must accept a new file (a read-only mount or folder, or a missing home, fail this), every SQLite file must be
writable, and the file system must have free space. The probe runs in a thread and is cached for
:data:`PROBE_TTL_S` seconds, so ``/readyz`` stays cheap.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from fabric.core.chunks import StoreWriter
from fabric.core.logs import get_logger
from fabric.ingest.check import CheckReport, check_stores
from fabric.ingest.homelock import HomeLock
from fabric.settings import Settings
from lanes.base import LaneResources

__all__ = ["PROBE_TTL_S", "Exclusive", "HomeGate", "repair_stores", "unwritable"]

log = get_logger(__name__)

PROBE_TTL_S = 2.0
"""How long a writability probe result is reused."""

Exclusive = Callable[[Callable[[], Awaitable[CheckReport]]], Awaitable[CheckReport | None]]
"""Runs a job under the replicas' writer lock, or returns None without running it."""

_STORE_DIRS = ("vectors", "qdrant", "spool")
"""Folders under the home that stores write into (probed when they exist)."""


def unwritable(home: Path) -> str | None:
    """Why the stores under ``home`` cannot be written, or None when they can (blocking: call it in a thread)."""
    dirs = [home, *(home / d for d in _STORE_DIRS if (home / d).is_dir())]
    for folder in dirs:
        try:
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-", delete=True) as fh:
                fh.write(b"x")
                fh.flush()
        except OSError as exc:
            return f"cannot write in {folder}: {exc.strerror or exc}"
    for db in sorted(p for folder in dirs for p in folder.glob("*.sqlite")):
        if not os.access(db, os.W_OK):
            return f"{db} is not writable"
    stat = os.statvfs(home)
    if stat.f_bavail == 0:
        return f"no free space left on the file system of {home}"
    return None


class HomeGate:
    """The service's hold on its home: lock, start-up repair, and the writability half of readiness.

    Args:
        home: the engine's home.
        shared: a replica over a shared state database (the lock is taken shared, :mod:`fabric.ingest.homelock`).
    """

    def __init__(self, home: Path, *, shared: bool = False) -> None:
        self.home = home
        self.lock = HomeLock(home, "fabric serve", shared=shared)
        self.repair: CheckReport | None = None
        """The start-up repair's report (None until it ran)."""
        self.tenant_repairs: dict[str, CheckReport] | None = None
        """The other tenants' start-up repairs, by tenant (None until they ran)."""
        self.repair_error: str | None = None
        self._probe: tuple[float, str | None] | None = None

    async def open(self, writers: Sequence[StoreWriter], *, vectors: bool = True) -> CheckReport:
        """Lock the home, then repair the stores from the ledger (the writers are the service's stores).

        Raises:
            HomeInUseError: another process holds the home.
        """
        self.lock.acquire()
        self.repair = await check_stores(self.home, writers, repair=True, vectors=vectors)
        return self._judge(self.repair)

    def _judge(self, report: CheckReport) -> CheckReport:
        """Record an incomplete repair as the reason the service is not ready; log what was repaired."""
        if not report.agree:
            self.repair_error = "the stores still disagree with the ledger after the start-up repair: " + "; ".join(
                f"{k}: {v}" for k, v in report.errors.items()
            )
            log.error("startup_repair_incomplete", **report.to_dict())
        elif report.repaired is not None:
            log.warning("startup_repair", **(report.repaired or {}))
        return report

    async def open_stores(
        self, settings: Settings, resources: LaneResources, *, exclusive: Exclusive | None = None
    ) -> CheckReport:
        """:meth:`open` with writers over the stores of ``settings`` (sharing an open engine's ``resources``).

        ``exclusive`` runs the repair only while no other replica can write (the tenant's writer lock,
        :meth:`fabric.serve.tasks.queue.IngestTasks.exclusive`); when another replica holds it (it is running a task),
        the repair is left to whichever replica resumes that task should its runner die, and reported as deferred.
        """
        self.lock.acquire()
        run = exclusive or (lambda job: job())
        try:
            report = await run(lambda: repair_stores(settings, resources))
        except (OSError, sqlite3.Error) as exc:  # a full disk or read-only home: serve, not ready, saying why
            log.error("startup_repair_failed", error=f"{type(exc).__name__}: {exc}")
            self.repair_error = f"the start-up repair could not run: {type(exc).__name__}: {exc}"
            report = CheckReport(ledger=0, pending=0, stores={})
        if report is None:
            log.info("startup_repair_deferred", reason="another replica holds the writer lock")
            report = CheckReport(ledger=0, pending=0, stores={})
        self.repair = report
        return self._judge(report)

    def tenants_repaired(self, reports: dict[str, CheckReport]) -> None:
        """Record the other tenants' start-up repairs: a tenant whose stores still disagree keeps the service not
        ready, as the ``default`` tenant's do."""
        self.tenant_repairs = reports
        failed = sorted(tenant for tenant, report in reports.items() if not report.agree)
        if failed:
            problem = (
                f"the stores of tenant(s) {', '.join(failed)} still disagree with the ledger after the start-up repair"
            )
            self.repair_error = problem if self.repair_error is None else f"{self.repair_error}; {problem}"

    def close(self) -> None:
        """Release the lock."""
        self.lock.release()

    async def ready(self) -> tuple[bool, dict[str, Any]]:
        """Whether the home is held, repaired and writable, with the details ``/readyz`` shows."""
        now = time.monotonic()
        if self._probe is None or now - self._probe[0] > PROBE_TTL_S:
            self._probe = (now, await asyncio.to_thread(unwritable, self.home))
        problem = self._probe[1]
        if not self.lock.held:
            problem = problem or "the home is not locked by this service (starting or stopping)"
        if self.repair is None or self.tenant_repairs is None:
            problem = problem or "the start-up repair has not finished"
        problem = problem or self.repair_error
        body: dict[str, Any] = {"writable": self._probe[1] is None, "error": problem}
        if self.repair is not None and self.repair.repaired is not None:
            body["startup_repair"] = self.repair.repaired
        repaired = {t: r.repaired for t, r in (self.tenant_repairs or {}).items() if r.repaired is not None}
        if repaired:
            body["tenant_repairs"] = repaired
        return problem is None, body


async def repair_stores(settings: Settings, resources: LaneResources) -> CheckReport:
    """``fabric check --repair`` over the stores of ``settings`` in ``resources.home`` (writers built over
    ``resources``, an engine's, closed afterwards): the service's start-up repair, every tenant's at start-up, and a
    tenant's when it opens."""
    from fabric.ingest.writers import build_writers  # deferred: imports every backend module

    writers = build_writers(settings, resources)
    try:
        return await check_stores(resources.home, writers, repair=True, vectors=resources.embedder is not None)
    finally:
        for writer in writers:
            await writer.aclose()
