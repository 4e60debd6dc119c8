"""Data-management routes of the service: deletes, the audit history, citation alignment and the OpenAPI document.

``DELETE /v1/entries/{entry_id}``
    Removes the entry's chunks (an id matches a chunk id or an entry's doc id) from every store, the graph's
    triples and edges and the ledger included (:mod:`fabric.ingest.deletion`); ``writer`` role. ``200`` with the
    report, ``404`` when nothing is stored under the id, ``503`` naming the stores that failed (repeat the
    delete to finish it). A tenant deletes only what it wrote (the audit history's latest write of each chunk);
    another tenant's entries answer as unknown. A writer key deletes only what writer keys wrote untrusted: an entry
    the operator or an admin key wrote, or one marked trusted, answers ``403`` naming the rule and the ``protected``
    ids (who holds each), and nothing is deleted (:mod:`fabric.ingest.provenance`).
``DELETE /v1/entries?source=...``
    The same for every entry of a source (``api``, ``<format>:<file name>`` as conflicts and audit records name
    it). An id holding ``/`` is sent percent-encoded (``%2F``); ids are taken as given (not trimmed).
``GET /v1/audit?entry_id=&since=&limit=&after=``
    The caller's tenant's audit history (:mod:`fabric.ingest.audit`), oldest first; ``next_after`` and ``next_url``
    page on. ``reader`` role.
``POST /v1/cite``
    Citation alignment (:func:`fusion.citations.align_citations`), answering the JSON of ``fabric cite --json``:
    ``{"answer", "items"}`` (the items of a search result) or ``{"answer", "query", "top_k"}`` (the engine
    searches first), optional ``threshold`` (0.7), ``max_per_sentence`` (3), ``semantic`` (the engine's
    embedder). ``reader`` role. Observed in ``fabric_citation_sentences_total`` (and per tenant).
``GET /openapi.json``
    The OpenAPI 3.1 document (:mod:`fabric.serve.openapi`), served without a key like the probes: it describes the
    API, never data.

Mutations are performed as the caller (:func:`fabric.ingest.audit.acting_as`) and counted in ``fabric_mutations_total``.
Deletes and ingestion tasks of one engine take turns (:func:`write_lock`), so a delete never interleaves with a
task writing the same chunks; a CLI run beside the service is seen by the ledger's write-ahead rows instead
(counted as ``concurrent_update`` conflicts).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from fabric.core.errors import FabricError, IngestError, QueryError, UnprocessableQueryError
from fabric.core.models import Hit
from fabric.ingest.audit import Actor, AuditLog, acting_as, parse_since
from fabric.ingest.conflicts import IdConflictError
from fabric.ingest.deletion import NothingToDelete, delete_entries
from fabric.ingest.provenance import ProvenanceError
from fabric.ingest.report import IngestReport, Progress
from fabric.ingest.writers import build_writers
from fabric.query.engine import Engine
from fabric.query.result_items import hits_from_json
from fabric.serve.auth import principal
from fabric.serve.bodies import parse_cite
from fabric.serve.openapi import MAX_AUDIT_LIMIT, MAX_PARAM_CHARS, build_openapi

__all__ = ["CITE_MAX_BODY_BYTES", "ReadJson", "add_data_routes", "observed_runner", "write_lock"]

CITE_MAX_BODY_BYTES = 1024 * 1024
"""Body cap of ``POST /v1/cite`` (an answer and up to 100 items with their text)."""

ReadJson = Callable[[web.Request, int], Awaitable[Any]]
"""The service's body reader (content type, size cap, depth-bounded JSON); raises with the response to answer."""
Runner = Callable[[Path, str | None, Progress], Awaitable[IngestReport]]

_ENGINE = web.AppKey("data_engine", Engine)
_READ = web.AppKey("data_read_json", object)
_OPENAPI = web.AppKey("openapi_bytes", bytes)
_AUDIT_PARAMS = ("entry_id", "since", "limit", "after")
_DELETE_PARAMS = ("source",)


_LOCKS: weakref.WeakKeyDictionary[Engine, asyncio.Lock] = weakref.WeakKeyDictionary()


def write_lock(engine: Engine) -> asyncio.Lock:
    """The lock that the service's mutations of ``engine``'s stores (ingestion tasks, deletes) take in turn."""
    lock = _LOCKS.get(engine)
    if lock is None:
        lock = _LOCKS[engine] = asyncio.Lock()
    return lock


class _Refused(Exception):
    """A request this module refuses: the error body's field, message and status."""

    def __init__(self, field: str | None, message: str, status: int = 400, **extra: Any) -> None:
        super().__init__(message)
        self.response = web.json_response({"error": {"field": field, "message": message, **extra}}, status=status)


def _actor(request: web.Request) -> Actor:
    who = principal(request)
    return Actor(tenant=who.tenant, key_id=who.key_id, task_id=None, via="api", role=who.role.label)


def _params(request: web.Request, known: tuple[str, ...]) -> None:
    unknown = sorted(set(request.query) - set(known))
    if unknown:
        raise _Refused("query", f"unknown parameter(s) {', '.join(unknown)}; valid: {', '.join(known)}")
    for name, value in request.query.items():
        if not value or len(value) > MAX_PARAM_CHARS:
            raise _Refused(name, f"expected 1 to {MAX_PARAM_CHARS} characters")


def _int(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _Refused(name, f"expected an integer, got {raw[:40]!r}") from None
    if not low <= value <= high:
        raise _Refused(name, f"must be in [{low}, {high}], got {value}")
    return value


# ---------------------------------------------------------------------------------------------------- deletes


async def _engine(request: web.Request) -> Engine:
    """The engine of the caller's tenant (its stores and home: :mod:`fabric.serve.tenant_engines`)."""
    from fabric.serve.tenant_engines import scope_of

    return (await scope_of(request)).engine


async def _delete(request: web.Request, ids: list[str], source: str | None) -> web.Response:
    engine = await _engine(request)
    resources = engine.resources
    if resources is None:
        raise _Refused(None, "the engine is not open", status=503)
    actor = _actor(request)
    writers = build_writers(engine.settings, resources)
    try:
        with acting_as(actor):
            async with write_lock(engine):
                report = await delete_entries(resources.home, writers, ids=ids, source=source, tenant=actor.tenant)
    except NothingToDelete as exc:
        engine.metrics.observe_mutation(actor.tenant, "delete", "failure")
        raise _Refused(exc.field, str(exc), status=404) from None
    except ProvenanceError as exc:
        engine.metrics.observe_mutation(actor.tenant, "delete", "conflict", {"provenance": len(exc.protected)})
        raise _Refused(exc.field, str(exc), status=403, protected=exc.shown()) from None
    finally:
        for writer in writers:
            await writer.aclose()
    engine.metrics.observe_mutation(actor.tenant, "delete", "success" if report.ok else "failure")
    if not report.ok:
        failed = "; ".join(f"{k}: {v}" for k, v in sorted(report.stores.items()) if v != "ok")
        msg = f"store(s) failed: {failed}; the entries stay marked for deletion: repeat the delete to finish"
        raise _Refused(None, msg, status=503, report=report.to_dict())
    return web.json_response(report.to_dict())


async def _delete_one(request: web.Request) -> web.Response:
    entry_id = request.match_info["entry_id"]
    if not entry_id or len(entry_id) > MAX_PARAM_CHARS:
        raise _Refused("entry_id", f"expected 1 to {MAX_PARAM_CHARS} characters")
    _params(request, ())
    return await _delete(request, [entry_id], None)


async def _delete_many(request: web.Request) -> web.Response:
    _params(request, _DELETE_PARAMS)
    source = request.query.get("source")
    if source is None:
        raise _Refused("source", "required (DELETE /v1/entries/{entry_id} deletes one entry)")
    return await _delete(request, [], source)


# ---------------------------------------------------------------------------------------------------- audit


async def _audit(request: web.Request) -> web.Response:
    _params(request, _AUDIT_PARAMS)
    limit = _int(request, "limit", 100, 1, MAX_AUDIT_LIMIT)
    after = _int(request, "after", 0, 0, 2**62)
    since = request.query.get("since")
    try:
        since_ts = parse_since(since) if since is not None else None
    except ValueError as exc:
        raise _Refused("since", str(exc)) from None
    entry_id = request.query.get("entry_id") or None
    tenant = principal(request).tenant
    engine = await _engine(request)
    home = engine.resources.home if engine.resources is not None else engine.settings.home

    def read() -> Any:
        log = AuditLog(home)
        try:
            return log.page(tenant, entry_id=entry_id, since=since_ts, after=after, limit=limit)
        finally:
            log.close()

    page = await asyncio.to_thread(read)
    next_url = None
    if page.next_after is not None:
        query = {k: v for k, v in request.query.items() if k != "after"} | {"after": str(page.next_after)}
        next_url = str(request.rel_url.with_query(query))
    body = {"records": [r.to_dict() for r in page.records], "next_after": page.next_after, "next_url": next_url}
    return web.json_response(body)


# ---------------------------------------------------------------------------------------------------- cite


async def _cite_hits(request: web.Request, body: dict[str, Any]) -> list[Hit]:
    if "items" in body:
        return hits_from_json(body["items"])  # validated by the contract (fabric.serve.bodies)
    from fabric.query.validation import parse_request

    engine = await _engine(request)
    try:
        search = parse_request({"query": body["query"], "top_k": body["top_k"]}, engine.settings)
        result = await engine.search(search)
    except QueryError as exc:
        raise _Refused(exc.field, exc.message, 422 if isinstance(exc, UnprocessableQueryError) else 400) from None
    return [it.hit for it in result.items]


async def _cite(request: web.Request) -> web.Response:
    from fusion.citations import align_citations, embedding_similarity

    read: ReadJson = request.app[_READ]  # type: ignore[assignment]
    data = await read(request, CITE_MAX_BODY_BYTES)
    engine = await _engine(request)
    try:
        body = parse_cite(data, engine.settings)  # the model GET /openapi.json publishes
    except QueryError as exc:
        raise _Refused(exc.field, exc.message) from None
    hits = await _cite_hits(request, body)
    embedder = engine.resources.embedder if engine.resources is not None and body["semantic"] else None
    similarity = embedding_similarity(embedder) if embedder is not None else None
    try:  # off the loop, and within the alignment's work budget (fusion.citations): over it, a 422
        result = await asyncio.to_thread(
            align_citations, body["answer"], hits, similarity=similarity, threshold=body["threshold"],
            max_per_sentence=body["max_per_sentence"],
        )  # fmt: skip
    except QueryError as exc:
        raise _Refused(exc.field, exc.message, 422) from None
    supported = sum(1 for s in result.sentences if s.citations)
    engine.metrics.observe_citations(supported=supported, total=len(result.sentences), tenant=principal(request).tenant)
    return web.json_response(result.to_dict())


# ---------------------------------------------------------------------------------------------------- wiring


async def _openapi(request: web.Request) -> web.Response:
    return web.Response(body=request.app[_OPENAPI], content_type="application/json")


def _refusals(handler: Callable[[web.Request], Awaitable[web.Response]]) -> Any:
    async def wrapped(request: web.Request) -> web.Response:
        try:
            return await handler(request)
        except _Refused as exc:
            return exc.response
        except IngestError as exc:
            return web.json_response({"error": {"field": None, "message": str(exc)}}, status=400)
        except Exception as exc:  # the service's body reader raises with its response attached
            response = getattr(exc, "response", None)
            if isinstance(response, web.Response):
                return response
            raise

    return wrapped


def add_data_routes(app: web.Application, engine: Engine, read_json: ReadJson) -> None:
    """Register the routes of the module docstring on ``app``."""
    import json

    app[_ENGINE] = engine
    app[_READ] = read_json
    app[_OPENAPI] = json.dumps(build_openapi(engine.settings), indent=1).encode()
    app.router.add_delete("/v1/entries/{entry_id}", _refusals(_delete_one))
    app.router.add_delete("/v1/entries", _refusals(_delete_many))
    app.router.add_get("/v1/audit", _refusals(_audit))
    app.router.add_post("/v1/cite", _refusals(_cite))
    app.router.add_get("/openapi.json", _openapi)


def observed_runner(runner: Runner, engine: Engine) -> Runner:
    """``runner`` counted in ``fabric_mutations_total`` and ``fabric_conflicts_total`` as the current actor."""
    from fabric.ingest.audit import current_actor

    async def run(path: Path, fmt: str | None, progress: Progress) -> IngestReport:
        tenant = current_actor().tenant
        metrics = engine.metrics
        try:
            async with write_lock(engine):
                report = await runner(path, fmt, progress)
        except IdConflictError as exc:
            metrics.observe_mutation(tenant, "ingest", "conflict", {"id_collision": len(exc.taken)})
            raise
        except ProvenanceError as exc:
            metrics.observe_mutation(tenant, "ingest", "conflict", {"provenance": len(exc.protected)})
            raise
        except (FabricError, OSError):
            metrics.observe_mutation(tenant, "ingest", "failure")
            raise
        ok = all(v == "ok" for v in report.stores.values())
        metrics.observe_mutation(
            tenant, "ingest", "success" if ok else "failure", {"concurrent_update": report.contended}
        )
        return report

    return run
