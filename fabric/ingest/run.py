"""Ingest one source into the stores a :class:`~fabric.settings.Settings` names (its home, embedder and writers).

The one entry that ``fabric ingest``, ``fabric demo`` and the eval harness share: it takes the home's lock
(:mod:`fabric.ingest.homelock`: refused, naming the holder's pid, while a service or another ingest writes the home),
builds the configured embedder and the enabled stores' writers, repairs the stores from the ledger when a crash
left it pending (:mod:`fabric.ingest.check`), runs :func:`fabric.ingest.pipeline.ingest`, and closes the writers.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from fabric.core.chunks import FinishingStore, StoreWriter
from fabric.core.logs import get_logger
from fabric.core.tenants import DEFAULT_TENANT, tenant_home
from fabric.embed.embeddings import build_embedder
from fabric.ingest.check import check_stores, pending_rows
from fabric.ingest.homelock import HomeLock
from fabric.ingest.pipeline import ingest
from fabric.ingest.report import IngestReport, Progress
from fabric.ingest.writers import build_writers
from fabric.settings import Settings
from lanes.base import LaneResources

__all__ = ["run_ingest"]

log = get_logger(__name__)


async def run_ingest(
    settings: Settings, path: Path, fmt: str | None, progress: Progress | None = None, *, tenant: str = DEFAULT_TENANT
) -> IngestReport:
    """Ingest ``path`` with the settings' embedder into every enabled store of ``tenant`` (``settings.home`` for
    ``default``; :mod:`fabric.core.tenants`).

    Raises:
        IngestError: the source cannot be read or parsed.
        ConfigError: invalid tenant name.
        HomeInUseError: another process holds the home's lock.
    """
    with HomeLock(settings.home, "fabric ingest"):  # the root home's lock covers every tenant's stores
        home = tenant_home(settings.home, tenant)
        embedder = build_embedder(settings.embeddings, settings.cache_dir)
        resources = LaneResources(home=home, tenant=tenant, embedder=embedder)
        writers = build_writers(settings, resources)
        try:
            if await asyncio.to_thread(pending_rows, home):  # an earlier run was interrupted
                check = await check_stores(home, writers, repair=True, vectors=embedder is not None)
                log.warning("ingest_repaired_interrupted_run", agree=check.agree, **(check.repaired or {}))
            report = await ingest(
                path, home=home, writers=writers, embedder=embedder, fmt=fmt, progress=progress,
                private_sources=settings.embeddings.private_sources,
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
