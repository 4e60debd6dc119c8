"""What the service builds its state from: this process alone (embedded SQLite and files under the home), or a
replica among several behind one address (``FABRIC_STATE_URL``, ``docs/replicas.md``), sharing a PostgreSQL
database or, on one host, a folder of SQLite files and file locks (``sqlite:///<folder>``, ``fabric serve
--workers``).

A :class:`Replica` holds this process's handles on the shared state and hands the service:

- the key store (:class:`fabric.serve.keys.postgres.SharedKeyStore`; on one host the home's ``keys.sqlite``): keys
  created or revoked through any replica, or the CLI, hold for all;
- the rate buckets (:class:`fabric.serve.state.shared.SharedBuckets`, :class:`fabric.serve.state.local.LocalBuckets`): a
  tenant's ``rate`` is its total;
- each tenant's task queue (:class:`fabric.serve.tasks.shared.SharedIngestTasks`);
- the cursor secret of each tenant (``FABRIC_CURSOR_SECRET`` when set, else one stored in the shared state).

The service's helpers that depend on the choice live here too: :func:`store_runner`, :func:`default_guard`,
:func:`ingest_tasks` and :func:`tenant_tasks`.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from fabric.core.tenants import DEFAULT_TENANT
from fabric.ingest.pipeline import ingest
from fabric.ingest.report import IngestReport, Progress
from fabric.ingest.selection import requested_selection
from fabric.ingest.writers import build_writers
from fabric.query.cursor_secret import CURSOR_SECRET_ENV
from fabric.query.engine import Engine
from fabric.serve.auth import Guard
from fabric.serve.hosts import HostPolicy
from fabric.serve.keys.postgres import SharedKeyStore
from fabric.serve.keys.store import KeyBackend, KeyStore
from fabric.serve.limits.tenants import Buckets, LimitConfig, TenantLimits, TenantMetrics
from fabric.serve.service_data import observed_runner
from fabric.serve.state.base import ReplicaState
from fabric.serve.state.local import LocalBuckets, LocalState, local_folder
from fabric.serve.state.postgres import SharedState
from fabric.serve.state.shared import SharedBuckets
from fabric.serve.tasks.queue import IngestTasks
from fabric.serve.tasks.shared import SharedIngestTasks, replica_name
from fabric.serve.tasks.submission import resolve_root

__all__ = ["Replica", "default_guard", "ingest_tasks", "key_store", "store_runner", "tenant_tasks"]


class Replica:
    """This process's share of the replicas' state: a PostgreSQL database (``postgresql://...``, replicas on any
    hosts) or a folder of SQLite files and file locks (``sqlite:///<folder>``, replicas on this host, as
    ``fabric serve --workers N`` runs them; :mod:`fabric.serve.state.local`).

    Args:
        url: ``FABRIC_STATE_URL``.
        home: the fabric home (a local state keeps the API keys in the home's ``keys.sqlite``).

    Raises:
        ConfigError: neither a PostgreSQL URL nor ``sqlite:///<absolute folder>``.
    """

    def __init__(self, url: str, home: Path | None = None) -> None:
        self.owner = replica_name()
        """This process's name on the tasks it runs."""
        self.keys: KeyBackend
        self.buckets: Buckets
        self.state: ReplicaState
        folder = local_folder(url)
        if folder is not None:
            self.state = LocalState(folder)
            self.keys = KeyStore(home if home is not None else folder)
            self.buckets = LocalBuckets(folder)
        else:
            shared = SharedState(url)
            self.state = shared
            self.keys = SharedKeyStore(shared.sync)
            self.buckets = SharedBuckets(shared.aio)

    @classmethod
    def of(cls, engine: Engine) -> Replica | None:
        """The replica of the engine's settings (None without ``FABRIC_STATE_URL``)."""
        settings = engine.settings
        return cls(settings.state_url, settings.home) if settings.state_url else None

    async def open(self) -> None:
        """Open the pools and create the schema (idempotent).

        Raises:
            ConfigError: the database cannot be reached.
        """
        await self.state.open()

    async def aclose(self) -> None:
        """Close the pools."""
        await self.state.aclose()
        if isinstance(self.buckets, LocalBuckets):
            self.buckets.close()

    def secret_for(self, tenant: str) -> Callable[[], Awaitable[bytes]]:
        """The cursor secret source of ``tenant``'s engine (``FABRIC_CURSOR_SECRET`` wins when set)."""

        async def source() -> bytes:
            env = os.environ.get(CURSOR_SECRET_ENV)
            if env:
                return env.encode("utf-8")
            return await self.state.secret(f"cursor:{tenant}")

        return source

    def tasks(self, engine: Engine, tenant: str, *, registry: bool = False) -> SharedIngestTasks:
        """``tenant``'s shared task queue writing into ``engine``'s stores (the engine's secret comes from here too)."""
        engine.secret_source = self.secret_for(tenant)
        settings = engine.settings

        async def repair() -> object:
            from fabric.serve.homegate import repair_stores

            if engine.resources is None:
                raise RuntimeError(f"the engine of tenant {tenant} is not open")
            return await repair_stores(engine.settings, engine.resources)

        return SharedIngestTasks(
            settings.ingest, home=settings.home, runner=observed_runner(store_runner(engine), engine),
            root=resolve_root(settings.ingest), state=self.state, tenant=tenant, owner=self.owner, repair=repair,
            registry=engine.metrics.registry if registry else None,
        )  # fmt: skip


def key_store(home: Path, replica: Replica | None) -> KeyBackend:
    """The replicas' key store, else ``<home>/keys.sqlite``."""
    return replica.keys if replica is not None else KeyStore(home)


def store_runner(engine: Engine) -> Callable[[Path, str | None, Progress], Awaitable[IngestReport]]:
    """Runs the pipeline into the stores the engine's lanes read, with the engine's embedder.

    The writers share the engine's resources: in local mode the Qdrant store and the vector lane use one
    client, and the SQLite stores are read through WAL, so a search sees each written batch as it commits.
    """

    async def run(path: Path, fmt: str | None, progress: Progress) -> IngestReport:
        resources = engine.resources
        if resources is None:
            raise RuntimeError("the engine is not open")
        writers = build_writers(engine.settings, resources)
        try:
            return await ingest(
                path, home=resources.home, writers=writers, embedder=resources.embedder, fmt=fmt, progress=progress,
                private_sources=engine.settings.embeddings.private_sources,
                selection=requested_selection(engine.settings.ingest),  # the request's include/exclude
            )  # fmt: skip
        finally:
            for writer in writers:
                await writer.aclose()

    return run


def default_guard(
    engine: Engine,
    limits: LimitConfig | None = None,
    replica: Replica | None = None,
    *,
    open_allowed: bool = True,
    hosts: HostPolicy | None = None,
) -> Guard:
    """The guard of the engine's home (keys in ``<home>/keys.sqlite``, buckets in memory), or of the replicas
    (keys and buckets in their database); per-tenant limits and metrics. ``open_allowed`` and ``hosts``: see
    :attr:`fabric.serve.auth.Guard.open_allowed` and :attr:`fabric.serve.auth.Guard.hosts`."""
    buckets = replica.buckets if replica is not None else None
    return Guard(
        key_store(engine.settings.home, replica),
        TenantLimits(limits or LimitConfig(), shared=buckets),
        TenantMetrics(engine.metrics.registry),
        open_allowed=open_allowed,
        hosts=hosts,
    )


def ingest_tasks(engine: Engine, replica: Replica | None = None) -> IngestTasks:
    """The ``default`` tenant's task queue writing into the engine's stores (not started).

    Raises:
        ConfigError: ``ingest.allowed_root`` is set but is not a folder.
    """
    if replica is not None:
        return replica.tasks(engine, DEFAULT_TENANT, registry=True)
    ingest_cfg = engine.settings.ingest
    return IngestTasks(
        ingest_cfg,
        home=engine.settings.home,
        runner=observed_runner(store_runner(engine), engine),
        root=resolve_root(ingest_cfg),
        registry=engine.metrics.registry,
    )


def tenant_tasks(replica: Replica | None) -> Callable[[Engine, str], IngestTasks] | None:
    """How :class:`fabric.serve.tenant_engines.TenantEngines` builds another tenant's queue (None: its default)."""
    if replica is None:
        return None
    return lambda engine, tenant: replica.tasks(engine, tenant)
