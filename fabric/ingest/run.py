"""Ingest one source into the stores a :class:`~fabric.config.Settings` names (its home, embedder and writers).

The one entry that ``fabric ingest``, ``fabric demo`` and the eval harness share: it takes the home's lock
(:mod:`fabric.homelock`: refused, naming the holder's pid, while a service or another ingest writes the home),
builds the configured embedder and the enabled stores' writers, repairs the stores from the ledger when a crash
left it pending (:mod:`fabric.ingest.check`), runs :func:`fabric.ingest.pipeline.ingest`, and closes the writers.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog

from fabric.config import Settings
from fabric.embeddings import build_embedder
from fabric.homelock import HomeLock
from fabric.ingest.check import check_stores, pending_rows
from fabric.ingest.pipeline import IngestReport, Progress, ingest
from fabric.ingest.writers import build_writers
from lanes.base import LaneResources

__all__ = ["run_ingest"]

log = structlog.get_logger(__name__)


async def run_ingest(settings: Settings, path: Path, fmt: str | None, progress: Progress | None = None) -> IngestReport:
    """Ingest ``path`` with the settings' embedder into every enabled store under ``settings.home``.

    Raises:
        IngestError: the source cannot be read or parsed.
        HomeInUseError: another process holds the home's lock.
    """
    with HomeLock(settings.home, "fabric ingest"):
        embedder = build_embedder(settings.embeddings, settings.cache_dir)
        resources = LaneResources(home=settings.home, embedder=embedder)
        writers = build_writers(settings, resources)
        try:
            if await asyncio.to_thread(pending_rows, settings.home):  # an earlier run was interrupted
                report = await check_stores(settings.home, writers, repair=True, vectors=embedder is not None)
                log.warning("ingest_repaired_interrupted_run", agree=report.agree, **(report.repaired or {}))
            return await ingest(
                path, home=settings.home, writers=writers, embedder=embedder, fmt=fmt, progress=progress
            )
        finally:
            for writer in writers:
                await writer.aclose()
