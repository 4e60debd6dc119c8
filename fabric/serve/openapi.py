"""The service's OpenAPI 3.1 document (``GET /openapi.json``), generated from the models that validate the requests.

The search and cite bodies are the JSON Schemas of their pydantic models (:mod:`fabric.query.contract`,
:mod:`fabric.serve.bodies`): the same objects refuse a request and write what the document says of it, so the two
cannot drift. Each entry of an ingest body is the JSON Schema of :class:`fabric.ingest.entries.Entry`, the model the
JSONL loader checks entries with; the body around it comes from :mod:`fabric.serve.tasks.submission` and the
``[ingest]`` settings, the data routes' limits from the constants below (:mod:`fabric.serve.service_data` enforces
them).
``tests/fabric/serve/test_openapi.py`` checks the routes against the document, and a stock
``schemathesis run --checks all`` against the live service (``.ci/schemathesis``) checks the answers.

Security: ``bearerAuth`` on every operation but the probes and this document. With no key configured the
service runs in open mode (loopback only, or ``--insecure``) and every request is the ``default`` tenant's admin.
``/mcp`` (the MCP streamable HTTP transport) is not described here: it speaks the MCP protocol, not REST.
"""

from __future__ import annotations

from typing import Any

from fabric import __version__
from fabric.ingest.entries import Entry
from fabric.ingest.loaders import FORMATS
from fabric.query.contract import NOT_BLANK, WEIGHT_COMPONENTS, clean_schema, json_schema, search_model
from fabric.serve.bodies import CITE_LIMITS, cite_adapter
from fabric.serve.tasks.submission import IDEMPOTENCY_KEY_PATTERN
from fabric.settings import Settings
from fusion.disagree import KINDS, SEVERITIES

__all__ = [
    "CITE_LIMITS",
    "MAX_AUDIT_LIMIT",
    "MAX_PARAM_CHARS",
    "NOT_BLANK",
    "WEIGHT_COMPONENTS",
    "build_openapi",
    "entry_schema",
    "search_schema",
]

MAX_AUDIT_LIMIT = 1000
"""Largest ``limit`` of ``GET /v1/audit``."""
MAX_PARAM_CHARS = 1024
"""Longest query parameter or path id of the data routes."""

_STR: dict[str, Any] = {"type": "string"}
_REF = "#/components/schemas/"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF + name}


def _enum(values: Any) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


def _lift(schema: dict[str, Any], into: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its ``$defs`` moved into the components ``into`` (references already point there)."""
    into.update(schema.pop("$defs", {}))
    return schema


def search_schema(settings: Settings, defs: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``POST /v1/search`` body: the JSON Schema of the model that validates it
    (:func:`fabric.query.contract.search_model`); nested models go to ``defs``."""
    return _lift(json_schema(search_model(settings), _REF), {} if defs is None else defs)


def entry_schema() -> dict[str, Any]:
    """One entry of ``POST /v1/ingest``: the JSON Schema of :class:`fabric.ingest.entries.Entry`, the model the JSONL
    loader checks every entry with."""
    schema = json_schema(Entry)
    schema["description"] = "One entry of the JSONL entry format; trust: trusted and source_kind: operator need admin."
    return schema


def _ingest_schema(settings: Settings) -> dict[str, Any]:
    entries = {"type": "array", "minItems": 1, "maxItems": settings.ingest.max_entries, "items": _ref("IngestEntry")}
    flag = {"async": {"type": "boolean"}}
    path = {"type": "string", "minLength": 1, "allOf": [{"pattern": NOT_BLANK}, {"pattern": "^[^\\x00]*$"}],
            "description": "Not only whitespace, no NUL (parse_submission refuses them)."}  # fmt: skip
    globs = {"type": "array", "items": _STR, "description": "Path globs replacing [ingest] include / exclude."}
    return {
        "oneOf": [
            {"type": "object", "required": ["entries"], "additionalProperties": False,
             "properties": {"entries": entries, "format": _enum(["jsonl"]), **flag}},
            {"type": "object", "required": ["path"], "additionalProperties": False,
             "properties": {"path": path, "format": _enum(FORMATS), **flag, "include": globs, "exclude": globs},
             "description": "A file or folder under ingest.allowed_root (admin only); include / exclude: markdown."},
        ]
    }  # fmt: skip


def _cite_schema(settings: Settings, defs: dict[str, Any]) -> dict[str, Any]:
    schema = cite_adapter(settings).json_schema(ref_template=_REF + "{model}")
    return _lift(clean_schema(schema), defs)


def _obj(required: list[str], **props: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": props}


def _route_schema() -> dict[str, Any]:
    """The result's ``route`` section (:meth:`fabric.core.strategies.RouteRecord.to_dict`), its stable keys."""
    years = {"type": ["array", "null"], "items": {"type": "integer"}, "minItems": 2, "maxItems": 2}
    shortfall = _obj(["found", "k", "years", "depth"], found={"type": "integer"}, k={"type": "integer"},
                     years=years, depth={"type": "integer"})  # fmt: skip
    shortfall["description"] = (
        "Temporal's hard year filter found fewer matching items than the pages up to this one ask for (k); the "
        "answer holds only those, never items of other years."
    )
    return _obj(
        [],
        route=_STR, strategy=_STR, chooser=_STR, rule=_STR, reason=_STR, lanes={"type": "array", "items": _STR},
        lane_calls={"type": "integer"}, year_filter=years, temporal_shortfall=shortfall,
    )  # fmt: skip


def _citation_schemas() -> dict[str, Any]:
    """A bibliography entry (:class:`fabric.core.sources.Source`) and a disagreement (:mod:`fusion.disagree`)."""
    nullable = {"type": ["string", "null"]}
    source = _obj(
        ["marker", "cited", "id", "item_ids", "title", "url", "domain", "published_at", "author", "excerpt"],
        marker={"type": ["integer", "null"], "minimum": 1}, cited={"type": "boolean"}, id=_STR,
        item_ids={"type": "array", "items": _STR}, title=_STR, url=_STR, domain=_STR, published_at=nullable,
        author=_STR, excerpt=_STR,
    )  # fmt: skip
    disagreement = _obj(
        ["sentence", "markers", "kind", "term", "topic", "severity", "detail"], sentence={"type": "integer"},
        markers={"type": "array", "items": {"type": "integer"}}, kind=_enum(KINDS), term=_STR, topic=_STR,
        severity=_enum(SEVERITIES), detail=_STR,
    )  # fmt: skip
    return {"Source": source, "Disagreement": disagreement}


def _response_schemas() -> dict[str, Any]:
    nullable = {"type": ["string", "null"]}
    triple = _obj(["subject", "predicate", "object"], **dict.fromkeys(("subject", "predicate", "object"), _STR))
    triples = {"type": "array", "items": triple}
    record = _obj(
        ["seq", "ts", "tenant", "subject", "action", "entry_id"], seq={"type": "integer"}, ts=_STR, tenant=_STR,
        subject=_enum(("entry", "triple")), action=_enum(("created", "updated", "deleted")), entry_id=_STR,
        doc_id=_STR, source=_STR, content_hash=_STR, triples=triples, task_id=nullable, key_id=nullable, via=_STR,
    )  # fmt: skip
    bibliography = {"type": "array", "items": _ref("Source")}
    return {
        "Error": _obj(["error"], error=_obj(["field", "message"], field=nullable, message=_STR)),
        **_citation_schemas(),
        "SearchResult": _obj(
            ["query", "mode", "items", "lanes"],
            query=_STR,
            mode=_STR,
            trace_id=_STR,
            partial={"type": "boolean"},
            items={"type": "array", "items": _obj(["id", "score_total"], id=_STR, score_total={"type": "number"})},
            next_cursor=nullable,
            lanes={"type": "object"},
            route=_route_schema(),
            bibliography=bibliography,
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
        "Citations": _obj(
            ["text", "sentences", "bibliography", "disagreements"],
            text=_STR,
            sentences={"type": "array"},
            bibliography=bibliography,
            disagreements={"type": "array", "items": _ref("Disagreement")},
        ),
    }


def _responses(ok: int, schema: str | None, *errors: int, media: str = "application/json") -> dict[str, Any]:
    content = {media: {"schema": _ref(schema) if schema else _STR}}
    out: dict[str, Any] = {str(ok): {"description": "OK", "content": content}}
    for code in errors:
        out[str(code)] = {"description": "Error", "content": {"application/json": {"schema": _ref("Error")}}}
    return out


_GUARDED = (401, 403, 421, 429, 503)  # 421: a foreign Host in open mode; 503: the key store cannot be read
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
                                "responses": _responses(200, "SearchResult", *_BODY, 409, 422, *_GUARDED, 503)}},
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
    defs: dict[str, Any] = {}  # the request models' nested models (SearchConstraints, CiteItem, ...)
    schemas = {
        "SearchRequest": search_schema(settings, defs),
        "IngestRequest": _ingest_schema(settings),
        "IngestEntry": entry_schema(),
        "CiteRequest": _cite_schema(settings, defs),
        **defs,
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
