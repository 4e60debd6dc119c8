"""The service's OpenAPI 3.1 document (``GET /openapi.json``), built from the validation code it describes.

Request schemas are derived, not copied: the search body from :mod:`fabric.query.validation` (its keys, limits and the
closed sets of :class:`~fabric.core.models.Mode`, :class:`~fabric.core.models.FusionMode`, the constraint choices, the
router's routes and the configured lane names), the ingest body from :mod:`fabric.serve.tasks.submission` and the
``[ingest]`` settings, the data routes' limits from the constants below (which :mod:`fabric.serve.service_data`
enforces). ``tests/fabric/serve/test_openapi.py`` checks every documented field and limit against the validators and
every route of the app against the document; a bounded schemathesis run against the live service checks the
answers against the response schemas.

Security: ``bearerAuth`` on every operation but the probes and this document. With no key configured the
service runs in open mode (loopback only, or ``--insecure``) and every request is the ``default`` tenant's admin.
``/mcp`` (the MCP streamable HTTP transport) is not described here: it speaks the MCP protocol, not REST.
"""

from __future__ import annotations

from typing import Any

from fabric import __version__
from fabric.core.models import Constraints, FusionMode, Mode
from fabric.core.strategies import ROUTES
from fabric.ingest.loaders import FORMATS
from fabric.query.validation import MAX_BUDGET_MS, MAX_WEIGHT
from fabric.serve.tasks.submission import IDEMPOTENCY_KEY_PATTERN
from fabric.settings import Settings

__all__ = [
    "CITE_LIMITS",
    "ENTRY_FIELDS",
    "MAX_AUDIT_LIMIT",
    "MAX_PARAM_CHARS",
    "NOT_BLANK",
    "WEIGHT_COMPONENTS",
    "build_openapi",
    "search_schema",
]

MAX_AUDIT_LIMIT = 1000
"""Largest ``limit`` of ``GET /v1/audit``."""
MAX_PARAM_CHARS = 1024
"""Longest query parameter or path id of the data routes."""
CITE_LIMITS = {"items": 100, "answer_chars": 20_000, "max_per_sentence": 10}
"""Bounds of a ``POST /v1/cite`` body."""
WEIGHT_COMPONENTS = ("lexical", "semantic", "graph")
"""Component names ``weights`` accepts besides lane names."""
ENTRY_FIELDS = ("id", "title", "text", "url", "published_at", "source_kind", "source_ref", "trust")
"""The JSONL entry fields ``POST /v1/ingest`` documents (``id`` and ``text`` required)."""

_STR: dict[str, Any] = {"type": "string"}
NOT_BLANK = r"[^\s\x1c-\x1f\x85]"
"""Some character Python's ``str.strip`` keeps (ECMA's whitespace class lacks U+001C to U+001F and U+0085)."""
_REF = "#/components/schemas/"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF + name}


def _enum(values: Any) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


def search_schema(settings: Settings) -> dict[str, Any]:
    """The ``POST /v1/search`` body as :func:`fabric.query.validation.parse_request` accepts it."""
    lanes = sorted(settings.lanes)
    enabled = sorted(lc.name for lc in settings.enabled_lanes())
    page = {"type": "integer", "minimum": 1, "maximum": settings.engine.max_top_k, "default": 10}
    weight = {"type": "number", "minimum": 0, "maximum": MAX_WEIGHT}
    props: dict[str, Any] = {
        "query": {
            "type": "string", "minLength": 1, "maxLength": settings.engine.max_query_bytes, "pattern": NOT_BLANK,
            "description": f"At most {settings.engine.max_query_bytes} UTF-8 bytes; not only whitespace.",
        },
        "mode": _enum(m.value for m in Mode),
        "top_k": page,
        "limit": {**page, "description": "Another name of top_k (the same page size; both must agree)."},
        "cursor": {"type": "string", "maxLength": 512, "description": "The opaque next_cursor of a result."},
        "constraints": {
            "type": "object", "additionalProperties": False,
            "properties": {
                "time_range": _enum(Constraints.TIME_RANGES), "sources": _enum(Constraints.SOURCES),
                "cost": _enum(Constraints.COSTS), "depth": _enum(Constraints.DEPTHS),
                "citations_required": {"type": "boolean"},
            },
        },
        "budget_ms": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_BUDGET_MS},
        "strict": {"type": "boolean"},
        "fusion": _enum(m.value for m in FusionMode),
        "lanes": {
            "type": "array", "minItems": 1, "items": _enum(enabled),
            "description": "Enabled lanes; a lane disabled in the configuration is accepted and answers an error.",
        },
        "weights": {
            "type": "object", "minProperties": 1, "propertyNames": _enum([*WEIGHT_COMPONENTS, *lanes]),
            "additionalProperties": weight,
            "description": "Lane or component → weight; some enabled lane must keep a weight above 0.",
        },
        "preflight": {"type": "boolean"},
        "route": _enum(ROUTES),
    }  # fmt: skip
    return {
        "type": "object", "required": ["query"], "additionalProperties": False, "properties": props,
        "not": {"required": ["top_k", "limit"], "description": "Give top_k or limit (both are refused unless equal)."},
    }  # fmt: skip


def _ingest_schema(settings: Settings) -> dict[str, Any]:
    entry = {
        "type": "object", "required": ["id", "text"],
        "properties": {name: {"type": "string", "minLength": 1} for name in ENTRY_FIELDS},
        "description": "One entry of the JSONL entry format; trust: trusted and source_kind: operator need admin.",
    }  # fmt: skip
    entries = {"type": "array", "minItems": 1, "maxItems": settings.ingest.max_entries, "items": entry}
    flag = {"async": {"type": "boolean"}}
    return {
        "oneOf": [
            {"type": "object", "required": ["entries"], "additionalProperties": False,
             "properties": {"entries": entries, "format": _enum(["jsonl"]), **flag}},
            {"type": "object", "required": ["path"], "additionalProperties": False,
             "properties": {"path": {"type": "string", "minLength": 1}, "format": _enum(FORMATS), **flag},
             "description": "A file or folder under ingest.allowed_root (admin only)."},
        ]
    }  # fmt: skip


def _cite_schema(settings: Settings) -> dict[str, Any]:
    texts = dict.fromkeys(("title", "text", "snippet", "url", "domain", "published_at"), _STR)
    item = _obj(["id"], id={"type": "string", "minLength": 1}, **texts, score_total={"type": "number"})
    common = {
        "answer": {"type": "string", "minLength": 1, "maxLength": CITE_LIMITS["answer_chars"], "pattern": NOT_BLANK},
        "threshold": {"type": "number", "minimum": 0.01, "maximum": 1, "default": 0.7},
        "max_per_sentence": {"type": "integer", "minimum": 1, "maximum": CITE_LIMITS["max_per_sentence"]},
        "semantic": {"type": "boolean"},
    }
    by_items = {"items": {"type": "array", "minItems": 1, "maxItems": CITE_LIMITS["items"], "items": item}}
    by_query = {
        "query": search_schema(settings)["properties"]["query"],
        "top_k": {"type": "integer", "minimum": 1, "maximum": settings.engine.max_top_k},
    }
    return {
        "oneOf": [
            {"type": "object", "required": ["answer", "items"], "additionalProperties": False,
             "properties": {**common, **by_items}},
            {"type": "object", "required": ["answer", "query"], "additionalProperties": False,
             "properties": {**common, **by_query}},
        ]
    }  # fmt: skip


def _obj(required: list[str], **props: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": props}


def _response_schemas() -> dict[str, Any]:
    nullable = {"type": ["string", "null"]}
    triple = _obj(["subject", "predicate", "object"], **dict.fromkeys(("subject", "predicate", "object"), _STR))
    triples = {"type": "array", "items": triple}
    record = _obj(
        ["seq", "ts", "tenant", "subject", "action", "entry_id"], seq={"type": "integer"}, ts=_STR, tenant=_STR,
        subject=_enum(("entry", "triple")), action=_enum(("created", "updated", "deleted")), entry_id=_STR,
        doc_id=_STR, source=_STR, content_hash=_STR, triples=triples, task_id=nullable, key_id=nullable, via=_STR,
    )  # fmt: skip
    return {
        "Error": _obj(["error"], error=_obj(["field", "message"], field=nullable, message=_STR)),
        "SearchResult": _obj(
            ["query", "mode", "items", "lanes"],
            query=_STR,
            mode=_STR,
            trace_id=_STR,
            partial={"type": "boolean"},
            items={"type": "array", "items": _obj(["id", "score_total"], id=_STR, score_total={"type": "number"})},
            next_cursor=nullable,
            lanes={"type": "object"},
        ),
        "Task": _obj(
            ["task_id", "status", "status_url"],
            task_id=_STR,
            status_url=_STR,
            status=_enum(("queued", "running", "succeeded", "failed")),
            report={"type": ["object", "null"]},
        ),
        "DeleteReport": _obj(
            ["matched", "deleted", "ids", "stores"],
            matched={"type": "integer"},
            deleted={"type": "integer"},
            ids={"type": "array", "items": _STR},
            stores={"type": "object", "additionalProperties": _STR},
        ),
        "AuditPage": _obj(
            ["records", "next_after", "next_url"],
            records={"type": "array", "items": record},
            next_after={"type": ["integer", "null"]},
            next_url=nullable,
        ),
        "Citations": _obj(["text", "sentences"], text=_STR, sentences={"type": "array"}),
    }


def _responses(ok: int, schema: str | None, *errors: int, media: str = "application/json") -> dict[str, Any]:
    content = {media: {"schema": _ref(schema) if schema else _STR}}
    out: dict[str, Any] = {str(ok): {"description": "OK", "content": content}}
    for code in errors:
        out[str(code)] = {"description": "Error", "content": {"application/json": {"schema": _ref("Error")}}}
    return out


_GUARDED = (401, 403, 429)
_BODY = (400, 408, 413, 415)


def _params() -> dict[str, list[dict[str, Any]]]:
    text = {"type": "string", "minLength": 1, "maxLength": MAX_PARAM_CHARS}
    return {
        "audit": [
            {"name": "entry_id", "in": "query", "schema": text},
            {"name": "since", "in": "query", "schema": {"type": "string", "format": "date-time"}},
            {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": MAX_AUDIT_LIMIT}},
            {"name": "after", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": 2**62}},
        ],
        "delete": [{"name": "source", "in": "query", "required": True, "schema": text}],
        "entry": [{"name": "entry_id", "in": "path", "required": True, "schema": text}],
        "task": [{"name": "task_id", "in": "path", "required": True, "schema": text}],
    }


def _body(schema: str) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": _ref(schema)}}}


def build_openapi(settings: Settings) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the service as configured by ``settings``."""
    p = _params()
    public: dict[str, Any] = {"security": []}
    paths: dict[str, Any] = {
        "/v1/search": {"post": {"operationId": "search", "requestBody": _body("SearchRequest"),
                                "responses": _responses(200, "SearchResult", *_BODY, 422, *_GUARDED, 503)}},
        "/v1/ingest": {"post": {"operationId": "ingest", "requestBody": _body("IngestRequest"),
                                "parameters": [{"name": "Idempotency-Key", "in": "header", "schema":
                                                {"type": "string", "pattern": IDEMPOTENCY_KEY_PATTERN}}],
                                "responses": {**_responses(200, "Task", *_BODY, *_GUARDED, 409, 422, 503),
                                              "202": {"description": "Queued", "content": {"application/json":
                                                      {"schema": _ref("Task")}}}}}},
        "/v1/ingest/{task_id}": {"get": {"operationId": "ingestStatus", "parameters": p["task"],
                                         "responses": _responses(200, "Task", 404, *_GUARDED)}},
        "/v1/entries/{entry_id}": {"delete": {"operationId": "deleteEntry", "parameters": p["entry"],
                                              "responses": _responses(200, "DeleteReport", 400, 404, *_GUARDED, 503)}},
        "/v1/entries": {"delete": {"operationId": "deleteEntries", "parameters": p["delete"],
                                   "responses": _responses(200, "DeleteReport", 400, 404, *_GUARDED, 503)}},
        "/v1/audit": {"get": {"operationId": "audit", "parameters": p["audit"],
                              "responses": _responses(200, "AuditPage", 400, *_GUARDED)}},
        "/v1/cite": {"post": {"operationId": "cite", "requestBody": _body("CiteRequest"),
                              "responses": _responses(200, "Citations", *_BODY, 422, *_GUARDED)}},
        "/metrics": {"get": {"operationId": "metrics", "responses": _responses(200, None, *_GUARDED,
                                                                                media="text/plain")}},
        "/healthz": {"get": {"operationId": "healthz", **public, "responses": _responses(200, None)}},
        "/readyz": {"get": {"operationId": "readyz", **public, "responses": _responses(200, None, 503)}},
        "/openapi.json": {"get": {"operationId": "openapi", **public, "responses": _responses(200, None)}},
    }  # fmt: skip
    for path in ("/healthz", "/readyz", "/openapi.json"):
        for code in paths[path]["get"]["responses"].values():
            code["content"] = {"application/json": {"schema": {"type": "object"}}}
    schemas = {
        "SearchRequest": search_schema(settings),
        "IngestRequest": _ingest_schema(settings),
        "CiteRequest": _cite_schema(settings),
        **_response_schemas(),
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "retrieval-fabric", "version": __version__,
                 "description": "Federated retrieval over concurrent lanes (see README: HTTP API)."},
        "security": [{"bearerAuth": []}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer", "description":
                                "An API key (fabric keys create). Open mode (no key configured): not needed."}},
        },
    }  # fmt: skip
