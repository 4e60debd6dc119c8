"""One engine and one ingestion task queue per tenant, for the service (``fabric serve``).

The service's own engine and task queue serve the ``default`` tenant (today's home, stores and names). At start-up,
before the service says ready, every tenant with a folder under the home has its stores repaired from its ledger, and
a tenant with unfinished tasks has its pair opened so they resume (:meth:`TenantEngines.recover`). Another tenant's
pair is opened on its first request (:meth:`TenantEngines.get`) and kept until the service stops:

- its engine reads the same settings with the tenant's home (:func:`fabric.core.tenants.tenant_home`), and its lanes
  are built over the tenant's stores (``LaneResources.tenant``: a folder per tenant for the embedded stores; a
  collection, index or database per tenant on the servers, :mod:`fabric.core.tenants`);
- it shares the process-wide resources of the service's engine: the HTTP session, the embedder (one model in
  memory), the metrics registry and the router's classifier (read from the service's home); its web cache is its
  own, so one tenant's web answers never answer another's query;
- its ingestion tasks (spool, task ids, idempotency keys) live under the tenant's home, so a task id of one
  tenant is unknown (``404``) to every other.

Lanes injected into the service's engine (tests, benchmarks) serve ``default`` only: other tenants' lanes are
always built from the settings, over their own stores.

Handlers ask for the caller's scope with :func:`scope_of`. The MCP tools, which run inside the SDK, read the
scope the service's middleware sets for the request (:data:`CURRENT_SCOPE`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web
from aiohttp.typedefs import Middleware

from fabric.core.logs import get_logger
from fabric.core.tenants import DEFAULT_TENANT, check_tenant, stored_tenants, tenant_home
from fabric.net.webcache import WebCache
from fabric.query.engine import Engine
from fabric.serve.auth import principal
from fabric.serve.keys.store import Principal
from fabric.serve.limits.admission import ADMISSION_KEY, CURRENT_ADMISSION
from fabric.serve.tasks.queue import IngestTasks, Runner
from fabric.serve.tasks.submission import resolve_root
from lanes.base import LaneResources

if TYPE_CHECKING:
    from fabric.ingest.check import CheckReport

__all__ = [
    "CURRENT_PRINCIPAL",
    "CURRENT_SCOPE",
    "TENANTS_KEY",
    "TenantEngines",
    "TenantScope",
    "scope_middleware",
    "scope_of",
    "tenant_resources",
]

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class TenantScope:
    """What a tenant's requests use: its engine and its ingestion tasks."""

    tenant: str
    engine: Engine
    tasks: IngestTasks


def tenant_resources(shared: LaneResources, root_home: Path, tenant: str) -> LaneResources:
    """``shared`` (HTTP session, embedder) for ``tenant``: its home under ``root_home``, its name (the server
    stores' names) and a web cache of its own.

    Raises:
        ConfigError: invalid tenant name.
    """
    home = tenant_home(root_home, tenant)
    return LaneResources(home=home, tenant=tenant, http=shared.http, embedder=shared.embedder, web_cache=WebCache())


def _has_unfinished(tasks: IngestTasks) -> bool:
    """Whether the queue's store holds queued or running tasks (blocking: opens the store)."""
    return bool(tasks.store.unfinished())


CURRENT_SCOPE: ContextVar[TenantScope | None] = ContextVar("fabric_tenant_scope", default=None)
"""The scope of the request being served (set around ``/mcp`` requests, read by the MCP tools)."""

CURRENT_PRINCIPAL: ContextVar[Principal | None] = ContextVar("fabric_principal", default=None)
"""The caller of the ``/mcp`` request being served (its key's tenant and role), so a tool that mutates checks the
role the route's guard could not (``/mcp`` is one read-only POST route for every tool); ``None`` on stdio."""


class TenantEngines:
    """The ``default`` scope (the service's engine and tasks) and the lazily opened scopes of other tenants.

    Args:
        root: the service's engine (the ``default`` tenant); it must be open before another tenant is asked for.
        root_tasks: the service's ingestion tasks.
        runner_for: the pipeline runner writing into an engine's stores (:func:`fabric.serve.replicas.store_runner`).
        tasks_for: builds a tenant's (unopened) engine's task queue instead of the default one over
            ``<tenant home>/tasks.sqlite`` (replicas: the shared queue, :func:`fabric.serve.replicas.Replica.tasks`).
    """

    def __init__(
        self,
        root: Engine,
        root_tasks: IngestTasks,
        *,
        runner_for: Callable[[Engine], Runner],
        tasks_for: Callable[[Engine, str], IngestTasks] | None = None,
    ) -> None:
        self.root = root
        self._runner_for = runner_for
        self._tasks_for = tasks_for
        self._scopes: dict[str, TenantScope] = {DEFAULT_TENANT: TenantScope(DEFAULT_TENANT, root, root_tasks)}
        self._locks: dict[str, asyncio.Lock] = {}
        self._repaired: set[str] = set()
        """Tenants whose stores :meth:`recover` repaired (their scope opens without a second repair)."""

    @property
    def tenants(self) -> list[str]:
        """Tenants whose scope is open, ``default`` included."""
        return sorted(self._scopes)

    async def get(self, tenant: str) -> TenantScope:
        """The scope of ``tenant``, opening its engine and starting its tasks on first use.

        Raises:
            ConfigError: invalid tenant name.
            RuntimeError: the service's engine is not open.
        """
        scope = self._scopes.get(tenant)
        if scope is not None:
            return scope
        check_tenant(tenant)
        async with self._locks.setdefault(tenant, asyncio.Lock()):
            scope = self._scopes.get(tenant)
            if scope is None:
                scope = self._scopes[tenant] = await self._open(tenant)
        return scope

    async def recover(self) -> dict[str, CheckReport]:
        """Start-up, before the service says ready: repair the stores of every tenant with a folder under the home
        from its ledger (the repair ``default`` gets, under the tenant's writer lock), and open the scope of each
        tenant with unfinished tasks so they resume. The others open on their first request without a second
        repair when this service alone holds the home (nothing else wrote their stores meanwhile); replicas, which
        share it, repair again then.

        Returns:
            The repaired tenants' reports (a tenant whose writer lock another replica holds is left to that replica).

        Raises:
            RuntimeError: the service's engine is not open.
        """
        reports: dict[str, CheckReport] = {}
        for tenant in stored_tenants(self.root.settings.home):
            async with self._locks.setdefault(tenant, asyncio.Lock()):
                if tenant in self._scopes:
                    continue
                scope = self._build(tenant)
                report = await scope.tasks.exclusive(partial(self._repair, scope.engine, tenant))
                if report is not None:
                    reports[tenant] = report
                    if self._tasks_for is None:  # no replica shares the home
                        self._repaired.add(tenant)
                if await asyncio.to_thread(_has_unfinished, scope.tasks):
                    self._scopes[tenant] = await self._start(scope)
                else:
                    await scope.tasks.aclose()  # closes the task store the question opened
        return reports

    def _build(self, tenant: str) -> TenantScope:
        """The tenant's engine (not open) and ingestion tasks (not started)."""
        root, shared = self.root, self.root.resources
        if shared is None:
            raise RuntimeError("the service's engine is not open")
        home = tenant_home(root.settings.home, tenant)
        settings = dataclasses.replace(root.settings, home=home)
        engine = Engine(settings, resources=tenant_resources(shared, root.settings.home, tenant), metrics=root.metrics)
        engine.router.home = root.settings.home  # the classifier is the operator's, trained once for the service
        if self._tasks_for is not None:
            tasks = self._tasks_for(engine, tenant)
        else:
            runner, ingest_root = self._runner_for(engine), resolve_root(settings.ingest)
            tasks = IngestTasks(settings.ingest, home=home, runner=runner, root=ingest_root, tenant=tenant)
        return TenantScope(tenant, engine, tasks)

    async def _open(self, tenant: str) -> TenantScope:
        return await self._start(self._build(tenant))

    async def _start(self, scope: TenantScope) -> TenantScope:
        """Open the scope's engine, repair its stores (unless :meth:`recover` did) and start its tasks."""
        tenant, engine, tasks = scope.tenant, scope.engine, scope.tasks
        await engine.open()
        try:
            if tenant not in self._repaired:
                await tasks.exclusive(partial(self._repair, engine, tenant))
            await tasks.start()
        except BaseException:
            await engine.aclose()
            raise
        log.info("tenant_opened", tenant=tenant, home=str(engine.settings.home), lanes=sorted(engine.lanes))
        return scope

    @staticmethod
    async def _repair(engine: Engine, tenant: str) -> CheckReport:
        """Repair the tenant's stores from its ledger before its tasks resume (the service's home lock, taken at
        start-up, covers every tenant's folder)."""
        from fabric.serve.homegate import repair_stores

        if engine.resources is None:
            raise RuntimeError(f"the engine of tenant {tenant} is not open")
        report = await repair_stores(engine.settings, engine.resources)
        if not report.agree:
            log.error("tenant_repair_incomplete", tenant=tenant, **report.to_dict())
        elif report.repaired is not None:
            log.warning("tenant_repair", tenant=tenant, **(report.repaired or {}))
        return report

    async def aclose(self) -> None:
        """Stop every other tenant's tasks and close its engine (the service closes its own)."""
        for tenant, scope in list(self._scopes.items()):
            if tenant == DEFAULT_TENANT:
                continue
            del self._scopes[tenant]
            try:
                await scope.tasks.aclose()
            finally:
                await scope.engine.aclose()


TENANTS_KEY = web.AppKey("tenants", TenantEngines)
"""Where the service keeps its tenants' scopes."""

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def scope_of(request: web.Request) -> TenantScope:
    """The scope of the caller's tenant (the guard's principal; ``default`` in open mode)."""
    return await request.app[TENANTS_KEY].get(principal(request).tenant)


def scope_middleware(path: str) -> Middleware:
    """A middleware setting :data:`CURRENT_SCOPE`, :data:`CURRENT_PRINCIPAL` and
    :data:`fabric.serve.limits.admission.CURRENT_ADMISSION` around the requests of ``path`` (the MCP transport), so the
    tools
    answer from the caller's tenant with the caller's role and queue like ``/v1/search``. Install it after the guard
    (it reads the principal)."""

    @web.middleware
    async def middleware(request: web.Request, handler: _Handler) -> web.StreamResponse:
        if request.path != path and not request.path.startswith(path + "/"):
            return await handler(request)
        token = CURRENT_SCOPE.set(await scope_of(request))
        who = CURRENT_PRINCIPAL.set(principal(request))
        admitted = CURRENT_ADMISSION.set(request.app.get(ADMISSION_KEY))
        try:
            return await handler(request)
        finally:
            CURRENT_ADMISSION.reset(admitted)
            CURRENT_PRINCIPAL.reset(who)
            CURRENT_SCOPE.reset(token)

    return middleware
