"""Ingest one source into the stores a :class:`~fabric.config.Settings` names (its home, embedder and writers).

The one entry that ``fabric ingest``, ``fabric demo`` and the eval harness share: it builds the configured
embedder and the enabled stores' writers, runs :func:`fabric.ingest.pipeline.ingest`, and closes the writers.
"""

from __future__ import annotations

from pathlib import Path

from fabric.config import Settings
from fabric.embeddings import build_embedder
from fabric.ingest.pipeline import IngestReport, Progress, ingest
from fabric.ingest.writers import build_writers
from fabric.tenants import DEFAULT_TENANT, tenant_home
from lanes.base import LaneResources

__all__ = ["run_ingest"]


async def run_ingest(
    settings: Settings, path: Path, fmt: str | None, progress: Progress | None = None, *, tenant: str = DEFAULT_TENANT
) -> IngestReport:
    """Ingest ``path`` with the settings' embedder into every enabled store of ``tenant`` (``settings.home`` for
    ``default``; :mod:`fabric.tenants`).

    Raises:
        IngestError: the source cannot be read or parsed.
        ConfigError: invalid tenant name.
    """
    home = tenant_home(settings.home, tenant)
    embedder = build_embedder(settings.embeddings, settings.cache_dir)
    resources = LaneResources(home=home, tenant=tenant, embedder=embedder)
    writers = build_writers(settings, resources)
    try:
        return await ingest(
            path, home=home, writers=writers, embedder=embedder, fmt=fmt, progress=progress,
            private_sources=settings.embeddings.private_sources,
        )  # fmt: skip
    finally:
        for writer in writers:
            await writer.aclose()
