"""The JSON contract of a search: one typed model per configuration that validates HTTP and MCP bodies and writes
their JSON Schema (``POST /v1/search``'s ``SearchRequest`` in ``GET /openapi.json``, the MCP ``query`` tool's input).

The model is the contract's one source: what it refuses is what the document marks invalid, and the reverse, so a
generated client and the service cannot disagree (``tests/fabric/query/test_contract.py``; a stock schemathesis run
in CI: ``.ci/schemathesis``). It is a pydantic v2 model (docs/servers.md: why pydantic, the cost per request):
strict types (``"3"`` is not a number, ``"SIMPLE"`` not a mode), integers also as whole floats (``3.0``: JSON Schema's
integers), limits from the settings (``engine.max_query_bytes``, ``engine.max_top_k``, the configured lanes).

Rules JSON Schema has no keyword for are written in the schema all the same, by the code that enforces them:

- the query's size: at most ``max_query_bytes // 4`` characters (so at most ``max_query_bytes`` UTF-8 bytes);
- ``weights`` must leave some enabled lane a weight above 0 (an ``anyOf`` over the enabled lanes);
- ``top_k`` and ``limit`` name the same page size: one of them;
- ``cursor``: the form :func:`fusion.cursor.encode_cursor` writes (one of that form that another query issued is
  answered ``409``: :class:`~fabric.core.errors.StaleQueryError`).

:func:`fabric.query.validation.validate_body` validates a body with the model, then makes the engine's
:class:`~fabric.core.models.SearchRequest` of it with :func:`~fabric.query.validation.parse_request` (defaults,
weights' components expanded to lanes). The CLI and the Python API call ``parse_request`` directly: it is lenient on
purpose (``--top-k 5`` arrives as text) and applies the same limits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, cast

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, create_model, model_validator

from fabric.core.checks import MAX_BUDGET_MS, MAX_WEIGHT
from fabric.core.errors import QueryError
from fabric.core.models import Constraints, FusionMode, LaneKind, Mode
from fabric.core.strategies import ROUTES
from fabric.settings import Settings
from fusion.cursor import CURSOR_PATTERN

__all__ = [
    "NOT_BLANK",
    "WEIGHT_COMPONENTS",
    "Body",
    "clean_schema",
    "json_schema",
    "query_chars",
    "query_error",
    "query_field",
    "search_model",
    "whole",
]

NOT_BLANK = r"[^\s\x1c-\x1f\x85]"
"""Some character Python's ``str.strip`` keeps (ECMA's whitespace class lacks U+001C to U+001F and U+0085)."""
WEIGHT_COMPONENTS: Mapping[str, LaneKind] = {
    "lexical": LaneKind.KEYWORD,
    "semantic": LaneKind.VECTOR,
    "graph": LaneKind.GRAPH,
}
"""Component names ``weights`` accepts besides lane names (every lane of that kind)."""


def _whole(value: Any) -> Any:
    """JSON Schema counts ``3.0`` as an integer: so does the contract."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def whole(**bounds: Any) -> Any:
    """A JSON Schema integer within ``bounds`` (``ge``, ``le``): ``3`` or ``3.0``, never ``"3"`` nor ``true``."""
    return Annotated[int, Field(**bounds), BeforeValidator(_whole)]


class Body(BaseModel):
    """A JSON body of the API: strict types, no unknown key, patterns with Python's ``re``."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, regex_engine="python-re")


def _enum(values: Any) -> Any:
    return Literal.__getitem__(tuple(values))


def query_chars(settings: Settings) -> int:
    """The longest query in characters: ``max_query_bytes // 4`` (a character is at most 4 UTF-8 bytes)."""
    return max(1, settings.engine.max_query_bytes // 4)


def query_field(settings: Settings) -> Any:
    """The ``query`` field (search and cite)."""
    limit = query_chars(settings)
    doc = f"At most {limit} characters (so at most {settings.engine.max_query_bytes} UTF-8 bytes); not only whitespace."
    return Annotated[str, Field(min_length=1, max_length=limit, pattern=NOT_BLANK, description=doc)]


def _weights_rule(settings: Settings) -> list[dict[str, Any]]:
    """``anyOf`` branches: some enabled lane keeps a weight above 0 (named, through its component, or its default)."""
    components = {kind: name for name, kind in WEIGHT_COMPONENTS.items()}
    above = {"exclusiveMinimum": 0}
    branches: list[dict[str, Any]] = []
    for lane in sorted(settings.enabled_lanes(), key=lambda lc: lc.name):
        comp = components.get(lane.kind)
        comp = None if comp in settings.lanes else comp  # a lane of the component's name wins (it is named)
        branches.append({"required": [lane.name], "properties": {lane.name: above}})
        if comp is not None:
            branches.append({"required": [comp], "properties": {comp: above}, "not": {"required": [lane.name]}})
        if lane.weight > 0:
            names = [lane.name] if comp is None else [lane.name, comp]
            branches.append({"not": {"anyOf": [{"required": [n]} for n in names]}})
    return branches


def _constraints_model() -> type[Body]:
    fields: dict[str, Any] = {
        name: (_enum(valid), None)
        for name, valid in (
            ("time_range", Constraints.TIME_RANGES),
            ("sources", Constraints.SOURCES),
            ("cost", Constraints.COSTS),
            ("depth", Constraints.DEPTHS),
        )
    }
    fields["citations_required"] = (bool, None)
    return create_model("SearchConstraints", __base__=Body, **fields)


class _OnePageSize(Body):
    model_config = ConfigDict(json_schema_extra={"not": {"required": ["top_k", "limit"]}})

    @model_validator(mode="after")
    def _one_page_size(self) -> _OnePageSize:
        if "top_k" in self.model_fields_set and "limit" in self.model_fields_set:
            raise ValueError("limit and top_k name the same page size; give one")
        return self


_MODELS: dict[tuple[Any, ...], type[Body]] = {}

_ANY_MODE = Annotated[str, Field(description="A query mode; another value runs as [engine] unknown_mode.")]
"""The ``mode`` field when ``[engine] unknown_mode`` is set (the fusion policy's fallback)."""


def _model(settings: Settings) -> type[Body]:
    page = whole(ge=1, le=settings.engine.max_top_k)
    weight = Annotated[float, Field(ge=0, le=MAX_WEIGHT, allow_inf_nan=False)]
    lanes = sorted(settings.lanes)
    lane, weight_key = _enum(lanes), _enum([*WEIGHT_COMPONENTS, *lanes])
    rule = cast(dict[str, Any], {"anyOf": _weights_rule(settings)})
    weights_doc = "Lane or component → weight; some enabled lane must keep a weight above 0."
    fields: dict[str, Any] = {
        "query": (query_field(settings), ...),
        "mode": (_enum(m.value for m in Mode) if settings.engine.unknown_mode is None else _ANY_MODE, None),
        "top_k": (page, None),
        "limit": (Annotated[page, Field(description="Another name of top_k (give one of them).")], None),
        "cursor": (Annotated[str, Field(pattern=CURSOR_PATTERN, description="The next_cursor of a result.")], None),
        "constraints": (_constraints_model(), None),
        "budget_ms": (Annotated[float, Field(gt=0, le=MAX_BUDGET_MS)], None),
        "strict": (bool, None),
        "fusion": (_enum(m.value for m in FusionMode), None),
        "lanes": (Annotated[list[lane], Field(min_length=1, description="Configured lanes.")], None),  # type: ignore[valid-type]
        "weights": (
            Annotated[
                dict[weight_key, weight],  # type: ignore[valid-type]
                Field(min_length=1, description=weights_doc, json_schema_extra=rule),
            ],
            None,
        ),
        "preflight": (bool, None),
        "route": (_enum(ROUTES), None),
    }
    return create_model("SearchRequest", __base__=_OnePageSize, **fields)


def search_model(settings: Settings) -> type[Body]:
    """The search body's model under ``settings`` (built once per distinct limits and lanes)."""
    lanes = tuple((n, lc.kind.value, lc.enabled, lc.weight) for n, lc in sorted(settings.lanes.items()))
    key = (settings.engine.max_query_bytes, settings.engine.max_top_k, lanes, settings.engine.unknown_mode)
    model = _MODELS.get(key)
    if model is None:
        model = _MODELS[key] = _model(settings)
    return model


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def query_error(exc: ValidationError | list[Any], *, root: str = "request") -> QueryError:
    """The first error of ``exc`` (or of a list of its errors) as the API's :class:`QueryError`: the field's path
    and a one-line message."""
    err = (exc.errors(include_url=False) if isinstance(exc, ValidationError) else exc)[0]
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    if loc[-1:] == ("[key]",):  # a mapping's key (weights): the mapping is the field
        loc = loc[:-2]
    kind, value, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    field = _where(loc) or root
    if kind == "extra_forbidden":
        if loc == ("offset",):
            return QueryError("offset", "not supported: page with the opaque 'cursor' returned as next_cursor")
        return QueryError(_where(loc[:-1]) or root, f"unknown key {loc[-1]!r}")
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    messages = {
        "missing": "required",
        "literal_error": f"unknown value {shown}; valid: {ctx.get('expected', '')}",
        "bool_type": f"expected true or false, got {shown}",
        "int_type": f"expected an integer, got {shown}",
        "string_type": f"expected a string, got {type(value).__name__}",
        "greater_than_equal": f"must be >= {ctx.get('ge')}, got {shown}",
        "less_than_equal": f"must be <= {ctx.get('le')}, got {shown}",
        "greater_than": f"must be > {ctx.get('gt')}, got {shown}",
        "string_too_long": f"too long: {len(value) if isinstance(value, str) else '?'} characters "
        f"(limit {ctx.get('max_length')} characters)",
        "string_pattern_mismatch": "must not be empty or whitespace only" if field in ("query", "answer") else None,
    }
    message = messages.get(kind) or f"{err['msg']}, got {shown}"
    if field == "cursor" and kind == "string_pattern_mismatch":
        message = "invalid cursor (malformed)"
    if field == "weights" and kind == "value_error":
        message = str(ctx.get("error", err["msg"]))
    if kind == "value_error" and not loc:
        return QueryError("limit", str(ctx.get("error", err["msg"])))
    return QueryError(field, message)


def json_schema(model: type[BaseModel], ref_prefix: str = "#/$defs/") -> dict[str, Any]:
    """``model``'s JSON Schema (validation side), without titles and ``null`` defaults (no field is nullable)."""
    schema = model.model_json_schema(ref_template=ref_prefix + "{model}")
    return cast(dict[str, Any], clean_schema(schema))


def clean_schema(node: Any) -> Any:
    """A generated schema without pydantic's ``title`` keys and ``null`` defaults (a client would send them)."""
    if isinstance(node, dict):
        return {
            k: clean_schema(v)
            for k, v in node.items()
            if not (k == "title" and isinstance(v, str)) and not (k == "default" and v is None)
        }
    if isinstance(node, list):
        return [clean_schema(v) for v in node]
    return node
