"""The HTTP service behind ``fabric serve``: an aiohttp.web app around one :class:`~fabric.query.engine.Engine`.

Routes:

``POST /v1/search``
    The request fields of :mod:`fabric.query.validation` → ``SearchResult.to_dict()``; a bad field ``400 {"error":
    {"field", "message"}}``, a strict partial answer ``503``, beyond admission (:mod:`fabric.serve.limits.admission`)
    a fast ``503`` with ``Retry-After``; never a traceback.
``GET /healthz`` (liveness: the process answers), ``GET /readyz``
    Readiness: the engine is open, at least one lane was built and none is still warming (the keyword lane
    reading its in-memory postings), the home is locked by this process, the start-up repair made the stores agree
    with the ledger, the stores can be written (:mod:`fabric.serve.homegate`) and the API key store can be read
    (:mod:`fabric.serve.auth`); ``503`` otherwise, with per-lane health, ``stores`` (``writable``, ``error``,
    ``startup_repair``) and ``keys`` (``mode``: ``open``, ``keyed``, ``locked`` or ``unavailable``). With
    ``fabric serve --workers``, every worker must be ready (:func:`fabric.serve.worker_metrics.not_ready`);
    ``workers`` names those that are not.
``GET /metrics``
    Prometheus text of the engine's registry; every request is counted and logged (:mod:`fabric.serve.observe`).
``POST /v1/ingest``, ``GET /v1/ingest/<task_id>``
    ``{"entries": [...]}`` or ``{"path": "..."}`` (under ``ingest.allowed_root``); an ``Idempotency-Key`` (else the
    body's hash) makes retries return the same task; small lists run inline (``200``), the rest answer ``202`` with
    the durable task to poll (:mod:`fabric.serve.tasks`): status, progress, the report or the error.
``DELETE /v1/entries/{id}``, ``DELETE /v1/entries?source=``, ``GET /v1/audit``, ``POST /v1/cite``, ``GET /openapi.json``
    Data management, citations and the OpenAPI document (:mod:`fabric.serve.service_data`).
``/mcp``, ``/`` and ``/api``
    The MCP server (:mod:`fabric.serve.mcp.server`, :mod:`fabric.serve.mcp.http`); the search console and the API
    reference (:mod:`fabric.serve.console`).

Every route answers from the caller's tenant: its own stores, tasks and idempotency keys
(:mod:`fabric.serve.tenant_engines`; ``default`` is the engine given here, others open on their first request).

Every route but ``/healthz``, ``/readyz`` and ``/openapi.json`` needs ``Authorization: Bearer <key>`` once keys
exist and is limited per tenant (:mod:`fabric.serve.auth`, :mod:`fabric.serve.limits.tenants`): ``401``, ``403``
or ``429`` in the same error shape. An empty answer over a tenant with nothing ingested carries a ``notice``.

Operator trust (``trust: trusted``, ``source_kind: operator``) and path submissions need an admin key (``403``
naming the field); so does a writer key's entry whose id the operator or an admin key wrote, one marked trusted, or
the tombstone of one (``403``, :mod:`fabric.ingest.provenance`: a writer never replaces, nor downgrades, what it did
not write); an id another source holds answers ``409`` with ``conflicts`` (id → source).

On start-up the home is locked, the engine opened and the stores reconciled with the ledger (then interrupted
tasks resume), every other tenant's stores too (and its interrupted tasks). Bodies are capped per route (search
``max_body_bytes``, ``ingest.max_body_bytes``): ``413`` beyond.
"""

from __future__ import annotations

import asyncio
import gc
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from fabric.core.errors import FabricError, PartialResultError, QueryError, StaleQueryError, UnprocessableQueryError
from fabric.core.logs import get_logger
from fabric.ingest.ledger import empty_tenant_notice
from fabric.query.engine import Engine
from fabric.query.validation import validate_body
from fabric.serve.auth import GUARD_KEY, Guard, identified, install_guard, principal
from fabric.serve.console import add_console
from fabric.serve.homegate import HomeGate
from fabric.serve.hosts import HostPolicy
from fabric.serve.keys.store import Role
from fabric.serve.limits.admission import (
    ADMISSION_KEY,
    AdmissionConfig,
    AdmissionControl,
    Overloaded,
    overloaded_response,
)
from fabric.serve.limits.server import TRUSTED_REQUEST_KEY, request_marks
from fabric.serve.looplag import LoopLag
from fabric.serve.observe import HTTP_METRICS_KEY, TRACE_KEY, HttpMetrics, observe
from fabric.serve.protocol import HANDLER_ARGS
from fabric.serve.replicas import Replica, default_guard, ingest_tasks, store_runner, tenant_tasks
from fabric.serve.requests import BodyError, error_body, json_errors, read_json, spool_body
from fabric.serve.service_data import add_data_routes, observed_runner
from fabric.serve.tasks.queue import IngestTasks, TaskStatus
from fabric.serve.tasks.stream import SpooledEntries, read_submission
from fabric.serve.tasks.submission import (
    IDEMPOTENCY_KEY_PATTERN,
    SubmitError,
    check_operator_fields,
    check_provenance,
)
from fabric.serve.tenant_engines import TENANTS_KEY, TenantEngines, scope_middleware, scope_of
from fabric.serve.worker_metrics import WORKERS_KEY
from fabric.serve.worker_metrics import gather as gather_workers
from fabric.serve.worker_metrics import not_ready as workers_not_ready

__all__ = [
    "ENGINE_KEY",
    "GATE_KEY",
    "LOOP_LAG_KEY",
    "TASKS_KEY",
    "create_app",
    "default_guard",
    "error_body",
    "ingest_tasks",
    "own_readiness",
    "store_runner",
]

log = get_logger(__name__)

ENGINE_KEY = web.AppKey("engine", Engine)
"""Where the app keeps its engine."""

TASKS_KEY = web.AppKey("ingest_tasks", IngestTasks)
"""Where the app keeps its ingestion tasks."""
GATE_KEY = web.AppKey("home_gate", HomeGate)
"""Where the app keeps its hold on the home (lock, start-up repair, writability)."""

LOOP_LAG_KEY = web.AppKey("loop_lag", LoopLag)
"""The service's event-loop lag sampler (:mod:`fabric.serve.looplag`; in ``/metrics`` as
``fabric_event_loop_lag_seconds``)."""
_SEARCH_LIMIT_KEY = web.AppKey("search_max_body_bytes", int)
_SPOOLED_KEY = web.RequestKey("ingest_spooled_entries", SpooledEntries)

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def _search(request: web.Request) -> web.StreamResponse:
    engine = (await scope_of(request)).engine
    admission = request.app[ADMISSION_KEY]
    try:
        data = await read_json(request, request.app[_SEARCH_LIMIT_KEY])
    except BodyError as exc:
        return exc.response
    if not isinstance(data, dict):
        return web.json_response(error_body("body", "expected a JSON object"), status=400)
    try:
        search_request = validate_body(data, engine.settings)  # the contract's model (GET /openapi.json)
        async with admission.slot():  # fabric.serve.limits.admission: the budget starts once admitted
            result = await engine.search(search_request)
        request[TRACE_KEY] = result.trace_id
        engine.metrics.observe_answer(principal(request).tenant, result)
    except Overloaded as exc:
        return admission.hand_back(overloaded_response(exc), refused=True)
    except PartialResultError as exc:
        return web.json_response(error_body(exc.field, exc.message, lanes=exc.lanes), status=503)
    except QueryError as exc:  # 409: a cursor another query issued; 422: every lane weighted 0
        status = 409 if isinstance(exc, StaleQueryError) else 422 if isinstance(exc, UnprocessableQueryError) else 400
        return web.json_response(error_body(exc.field, exc.message), status=status)
    except FabricError as exc:
        log.warning("search_failed", error=str(exc))
        return web.json_response(error_body(None, str(exc)), status=500)
    payload = result.to_dict()
    if not result.items:  # an empty answer over an empty tenant is never silent
        notice = await asyncio.to_thread(empty_tenant_notice, engine.settings.home, principal(request).tenant)
        if notice:
            payload["notice"] = notice
    return admission.hand_back(web.json_response(payload))


def _idempotency_key(request: web.Request) -> str | None:
    raw = request.headers.get("Idempotency-Key")
    if raw is None:
        return None
    key = raw.strip()
    if re.fullmatch(IDEMPOTENCY_KEY_PATTERN, key) is None:
        raise SubmitError("Idempotency-Key", "expected 1 to 255 visible ASCII characters (inner spaces allowed)")
    return key


async def _ingest(request: web.Request) -> web.Response:
    try:
        return await _submit_ingest(request)
    finally:  # the streamed body's entries file, once answered (an inline task has read it by then)
        spooled = request.get(_SPOOLED_KEY)
        if spooled is not None:
            spooled.close()


async def _submit_ingest(request: web.Request) -> web.Response:
    scope = await scope_of(request)
    tasks, config = scope.tasks, scope.engine.settings.ingest
    home = (scope.engine.resources or scope.engine.settings).home
    try:  # streamed to a file, then parsed entry by entry (fabric.serve.tasks.stream): memory never scales with it
        raw = await spool_body(request, config.max_body_bytes, home)
    except BodyError as exc:
        return exc.response
    try:
        who = principal(request)  # a writer's path is refused before it is looked at: no probing the disk
        with raw:
            key = _idempotency_key(request)
            sub = await asyncio.to_thread(read_submission, raw, config, tasks.root, home, paths=who.role >= Role.ADMIN)
        if isinstance(sub.entries, SpooledEntries):
            request[_SPOOLED_KEY] = sub.entries
        check_operator_fields(sub, allowed=who.role >= Role.ADMIN)
        sub = replace(sub, tenant=who.tenant, key_id=who.key_id, role=who.role.label)
        await asyncio.to_thread(check_provenance, sub, home)
        inline = sub.kind == "entries" and not sub.force_async and sub.count <= config.sync_max_entries and tasks.idle
        task, created = await tasks.submit(sub, key=key)
    except SubmitError as exc:
        if exc.field == "Idempotency-Key" and exc.status == 409:  # reused with another body: a conflict
            metrics = request.app[ENGINE_KEY].metrics
            metrics.observe_mutation(principal(request).tenant, "ingest", "conflict", {"idempotency_key": 1})
        return web.json_response(error_body(exc.field, exc.message), status=exc.status)
    if inline:
        task = await tasks.wait(task)
    body = {**task.to_dict(), "created": created}
    if task.status is TaskStatus.SUCCEEDED and (inline or not created):
        return web.json_response(body)
    if task.status is TaskStatus.FAILED and inline:
        status, field = (409, "entries") if task.conflicts else (500, None)
        if not task.conflicts:  # refused by provenance in the pipeline (a write raced the check above)? 403 then
            try:
                await asyncio.to_thread(check_provenance, sub, home)
            except SubmitError as exc:
                status, field = 403, exc.field
        return web.json_response(error_body(field, task.error or "ingestion failed", task=body), status=status)
    return web.json_response(body, status=202, headers={"Location": body["status_url"]})


async def _ingest_status(request: web.Request) -> web.Response:
    task_id = request.match_info["task_id"]
    task = await (await scope_of(request)).tasks.aget(task_id)
    if task is None:
        msg = "unknown task (records of the most recent finished tasks are kept, see ingest.history)"
        return web.json_response(error_body("task_id", msg), status=404)
    return web.json_response(task.to_dict())


async def _healthz(_request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def own_readiness(app: web.Application) -> tuple[bool, dict[str, Any]]:
    """Whether this process is ready (the engine open with a lane built and none warming, the home writable), and
    the body of its ``/readyz``."""
    health = app[ENGINE_KEY].health()
    home_ok, home = await app[GATE_KEY].ready()
    keys_ok, keys = await app[GUARD_KEY].readiness()  # a key store that cannot be read: every request is a 503
    lanes = health["lanes"].values()
    ready = bool(health["open"]) and any(lane["built"] for lane in lanes) and home_ok and keys_ok
    ready = ready and not any(lane["warming"] for lane in lanes)
    body = {
        "status": "ready" if ready else "not_ready",
        "stores": home,
        "keys": keys,
        "lanes": health["lanes"],
        "inflight": health["inflight"],
    }
    return ready, body


async def _readyz(request: web.Request) -> web.Response:
    ready, body = await own_readiness(request.app)
    workers = request.app.get(WORKERS_KEY)  # fabric serve --workers: ready when every worker is
    if workers is not None:
        waiting = await workers_not_ready(workers)
        ready = ready and not waiting
        body["status"] = "ready" if ready else "not_ready"
        body["workers"] = {"count": workers.count, "this": workers.index, "not_ready": waiting}
    return web.json_response(body, status=200 if ready else 503, dumps=lambda o: json.dumps(o, default=str))


async def _metrics(request: web.Request) -> web.Response:
    registry = request.app[ENGINE_KEY].metrics.registry
    request.app[HTTP_METRICS_KEY].store_writable.set((await request.app[GATE_KEY].ready())[1]["writable"])
    workers = request.app.get(WORKERS_KEY)  # fabric serve --workers: every worker's, labelled
    payload = generate_latest(registry) if workers is None else await gather_workers(workers, registry)
    resp = web.Response(body=payload)
    resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
    return resp


def _add_lifecycle(
    app: web.Application,
    engine: Engine,
    tasks: IngestTasks,
    gate: HomeGate,
    tenants: TenantEngines,
    lag: LoopLag,
    replica: Replica | None,
) -> None:
    """Start-up: open the replicas' database, lock the home, open the engine, repair the stores, resume tasks, then
    the same for every other tenant with a folder (:meth:`TenantEngines.recover`); clean-up in reverse."""

    async def on_startup(_app: web.Application) -> None:
        if replica is not None:
            await replica.open()
        gate.lock.acquire()  # before anything opens a store: a second service is refused naming the holder
        await engine.open()
        if engine.resources is None:
            raise RuntimeError("the engine is not open")
        await gate.open_stores(engine.settings, engine.resources, exclusive=tasks.exclusive)
        await tasks.start()
        gate.tenants_repaired(await tenants.recover())
        lag.start()
        # Everything built at start-up (models, stores, config) lives for the process: move it out of the
        # collector's reach so full collections do not pause the loop for tens of ms under load.
        gc.collect()
        gc.freeze()

    async def on_cleanup(_app: web.Application) -> None:
        await tenants.aclose()
        await lag.stop()
        await tasks.aclose()
        await engine.aclose()
        gate.close()
        if replica is not None:
            await replica.aclose()

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)


def create_app(
    engine: Engine,
    *,
    max_body_bytes: int = 64 * 1024,
    guard: Guard | None = None,
    mcp: bool = True,
    host: str = "127.0.0.1",
    admission: AdmissionConfig | None = None,
    replica: Replica | None = None,
) -> web.Application:
    """The service app; it opens ``engine`` and the ingestion worker on start-up and closes them on clean-up.

    Args:
        engine: the engine to serve (opened at start-up).
        max_body_bytes: body cap of ``POST /v1/search``.
        guard: the request guard (API keys, roles, per-tenant limits: :mod:`fabric.serve.auth`) of every route but the
            probes, ``/mcp`` included; default :func:`default_guard` (the keys of the engine's home).
        mcp: whether to mount the MCP streamable HTTP transport at ``/mcp``.
        host: the address the service binds (``Host`` checks are the guard's: :mod:`fabric.serve.hosts`).
        admission: limits of the search route's admission control (:mod:`fabric.serve.limits.admission`); default from
        the cores.
        replica: this process's share of the replicas' database; default one when ``FABRIC_STATE_URL`` is set
            (:mod:`fabric.serve.replicas`), else none (embedded state under the home).

    Raises:
        ConfigError: ``ingest.allowed_root`` is set but is not a folder.
    """
    ingest_cfg = engine.settings.ingest
    app = web.Application(
        middlewares=[observe, json_errors, request_marks],
        client_max_size=max(max_body_bytes, ingest_cfg.max_body_bytes),
        handler_args=HANDLER_ARGS,  # every documented URL fits the request line (fabric.serve.protocol)
    )
    app[ENGINE_KEY], app[HTTP_METRICS_KEY] = engine, HttpMetrics(engine.metrics.registry)
    app[_SEARCH_LIMIT_KEY] = max_body_bytes
    app[ADMISSION_KEY] = AdmissionControl(admission, engine.metrics.registry)
    replica = replica or Replica.of(engine)
    tasks = ingest_tasks(engine, replica)
    app[TASKS_KEY] = tasks
    tenants = app[TENANTS_KEY] = TenantEngines(
        engine, tasks, runner_for=lambda e: observed_runner(store_runner(e), e), tasks_for=tenant_tasks(replica)
    )
    gate = HomeGate(engine.settings.home, shared=replica is not None)
    app[GATE_KEY] = gate
    install_guard(app, guard or default_guard(engine, replica=replica, hosts=HostPolicy.of((), bind=host)))
    app[TRUSTED_REQUEST_KEY] = lambda r: identified(r) is not None  # its connection never gives way at a cap

    lag = LoopLag(registry=engine.metrics.registry)
    app[LOOP_LAG_KEY] = lag
    _add_lifecycle(app, engine, tasks, gate, tenants, lag, replica)
    _add_routes(app, engine)
    if mcp:
        from fabric.serve.mcp.http import MCP_PATH, mount_mcp
        from fabric.serve.mcp.server import build_server

        app.middlewares.append(scope_middleware(MCP_PATH))  # after the guard: tenant, role and admission per call
        cap = max(max_body_bytes, ingest_cfg.max_body_bytes)  # the ingest tool's entries come in this body
        mount_mcp(app, build_server(engine, tasks), host=host, max_body_bytes=cap)
    return app


def _add_routes(app: web.Application, engine: Engine) -> None:
    for method, path, handler in _ROUTES:
        app.router.add_route(method, path, handler)
    add_console(app)
    add_data_routes(app, engine, read_json)


_ROUTES = (
    ("POST", "/v1/search", _search),
    ("GET", "/healthz", _healthz),
    ("GET", "/readyz", _readyz),
    ("GET", "/metrics", _metrics),
    ("POST", "/v1/ingest", _ingest),
    ("GET", "/v1/ingest/{task_id}", _ingest_status),
)
