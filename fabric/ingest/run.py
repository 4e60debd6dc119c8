"""Ingest one source into the stores a :class:`~fabric.settings.Settings` names (its home, embedder and writers).

The one entry that ``fabric ingest``, ``fabric demo`` and the eval harness share: it takes the home's lock
(:mod:`fabric.ingest.homelock`: refused, naming the holder's pid, while a service or another ingest writes the home),
builds the configured embedder and the enabled stores' writers, repairs the stores from the ledger when a crash
left it pending (:mod:`fabric.ingest.check`), runs :func:`fabric.ingest.pipeline.ingest`, and closes the writers.
A folder is narrowed by ``[ingest] include`` / ``exclude`` (``include`` / ``exclude`` given here replace them) and
trusted by ``[ingest.trust]`` (:mod:`fabric.ingest.selection`).
The audit history records the writes as the tenant's local operator (key id
:data:`~fabric.ingest.audit.OPERATOR_KEY_ID`, via ``cli``), so the tenant lists them and may delete them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

from fabric.core.chunks import FinishingStore, StoreWriter
from fabric.core.logs import get_logger
from fabric.core.tenants import DEFAULT_TENANT, tenant_home
from fabric.embed.embeddings import build_embedder
from fabric.ingest.audit import OPERATOR_KEY_ID, Actor, acting_as
from fabric.ingest.check import check_stores, pending_rows
from fabric.ingest.homelock import HomeLock
from fabric.ingest.pipeline import ingest
from fabric.ingest.report import IngestReport, Progress
from fabric.ingest.selection import selection_for
from fabric.ingest.writers import build_writers
from fabric.settings import Settings
from lanes.base import LaneResources

__all__ = ["run_ingest"]

log = get_logger(__name__)


async def run_ingest(
    settings: Settings,
    path: Path,
    fmt: str | None,
    progress: Progress | None = None,
    *,
    tenant: str = DEFAULT_TENANT,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    by: str = "cli",
) -> IngestReport:
    """Ingest ``path`` with the settings' embedder into every enabled store of ``tenant`` (``settings.home`` for
    ``default``; :mod:`fabric.core.tenants`); ``include`` / ``exclude`` (given by ``by``) replace the configured
    allowlist.

    Raises:
        IngestError: the source cannot be read or parsed, or the allowlist is refused.
        ConfigError: invalid tenant name.
        HomeInUseError: another process holds the home's lock.
    """
    selection = selection_for(settings.ingest, include, exclude, by=by)  # a bad glob fails before the lock
    home = tenant_home(settings.home, tenant)
    operator = Actor(tenant=tenant, key_id=OPERATOR_KEY_ID, via="cli")
    with HomeLock(settings.home, "fabric ingest"), acting_as(operator):  # the home's lock covers its tenants' folders
        embedder = build_embedder(settings.embeddings, settings.cache_dir)
        resources = LaneResources(home=home, tenant=tenant, embedder=embedder)
        writers = build_writers(settings, resources)
        try:
            if await asyncio.to_thread(pending_rows, home):  # an earlier run was interrupted
                check = await check_stores(home, writers, repair=True, vectors=embedder is not None)
                log.warning("ingest_repaired_interrupted_run", agree=check.agree, **(check.repaired or {}))
            report = await ingest(
                path, home=home, writers=writers, embedder=embedder, fmt=fmt, progress=progress,
                private_sources=settings.embeddings.private_sources, selection=selection,
            )  # fmt: skip
            await _finish(writers, report, progress or Progress())
            return report
        finally:
            for writer in writers:
                await writer.aclose()


async def _finish(writers: list[StoreWriter], report: IngestReport, progress: Progress) -> None:
    """Let the stores that have work after an ingest do it (the ``index`` stage: the vector store's graph)."""
    t0 = time.perf_counter()
    finishing = [w for w in writers if isinstance(w, FinishingStore)]
    progress.stage("index", len(finishing))
    for writer in finishing:
        done = await writer.finish()
        log.info("store_finished", store=writer.store, **done)
        progress.advance("index", 1)
    spent = time.perf_counter() - t0
    report.seconds["index"] = spent
    report.seconds["total"] = report.seconds.get("total", 0.0) + spent
