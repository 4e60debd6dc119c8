"""Request validation: a raw mapping (CLI arguments, HTTP JSON body) → a typed :class:`SearchRequest`.

Every rejection is a :class:`~fabric.core.errors.QueryError` naming the field and, for closed sets, listing the
valid values, so callers (CLI, HTTP, Python) can show one clear line instead of a traceback.

Accepted keys: ``query`` (required), ``mode``, ``top_k`` (or its seed-001 name ``limit``: the same page size;
giving both with different values is an error), ``cursor``, ``constraints``, ``budget_ms``, ``strict``,
``fusion``, ``lanes``, ``weights``, ``preflight``, ``route`` (``all``, ``auto`` or a strategy: docs/router.md).
``weights`` maps lane names, or the components ``lexical`` / ``semantic`` / ``graph`` (every lane of that kind),
to a weight in [0, 100] (some enabled lane must keep a weight above 0), e.g. ``{"semantic": 2, "graph": 0.5}``
or ``"semantic=2,graph=0.5"``. ``offset`` is refused on purpose: pages are addressed by the opaque ``cursor``
only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from fabric.core.checks import MAX_BUDGET_MS, MAX_WEIGHT, page_size, query_text
from fabric.core.checks import budget_ms as _budget
from fabric.core.checks import choice as _choice
from fabric.core.checks import text as _text
from fabric.core.checks import weight as _weight
from fabric.core.errors import QueryError, UnprocessableQueryError
from fabric.core.models import Constraints, FusionMode, LaneKind, Mode, SearchRequest
from fabric.core.strategies import ROUTES
from fabric.query.contract import WEIGHT_COMPONENTS, query_chars, query_error, search_model
from fabric.settings import Settings

__all__ = [
    "KNOWN_KEYS",
    "MAX_BUDGET_MS",
    "MAX_WEIGHT",
    "check_request",
    "parse_request",
    "tool_body",
    "validate_body",
    "weight_pairs",
]

KNOWN_KEYS = (
    "query",
    "mode",
    "top_k",
    "cursor",
    "constraints",
    "budget_ms",
    "strict",
    "fusion",
    "lanes",
    "weights",
    "limit",
    "preflight",
    "route",
)
"""Top-level request keys."""


_WEIGHT_COMPONENTS: Mapping[str, LaneKind] = WEIGHT_COMPONENTS


_CONSTRAINT_CHOICES: Mapping[str, tuple[str, ...]] = {
    "time_range": Constraints.TIME_RANGES,
    "sources": Constraints.SOURCES,
    "cost": Constraints.COSTS,
    "depth": Constraints.DEPTHS,
}
_CONSTRAINT_KEYS = (*_CONSTRAINT_CHOICES, "citations_required")


def _bool(value: Any, field: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.strip().lower() in ("true", "1", "yes")
    raise QueryError(field, f"expected true or false, got {value!r}")


def _query(value: Any, settings: Settings) -> str:
    """The query: at most ``max_query_bytes // 4`` characters, so at most ``max_query_bytes`` UTF-8 bytes whatever
    the characters (a limit JSON Schema's ``maxLength`` states exactly: :mod:`fabric.query.contract`)."""
    text = query_text(value)
    limit = query_chars(settings)
    if len(text) > limit:
        msg = f"too long: {len(text)} characters (limit {limit} characters, {settings.engine.max_query_bytes} bytes)"
        raise QueryError("query", msg)
    return text


def _top_k(value: Any, settings: Settings, field: str = "top_k") -> int:
    size = page_size(value, field)
    if size > settings.engine.max_top_k:
        raise QueryError(field, f"must be <= {settings.engine.max_top_k}, got {size}")
    return size


def _page_size(data: Mapping[str, Any], settings: Settings) -> int:
    """``top_k``, or the API contract's ``limit`` (the same thing); both given must agree."""
    top_k = None if data.get("top_k") is None else _top_k(data["top_k"], settings)
    limit = None if data.get("limit") is None else _top_k(data["limit"], settings, "limit")
    if top_k is not None and limit is not None and top_k != limit:
        raise QueryError("limit", f"limit ({limit}) and top_k ({top_k}) name the same page size; give one")
    return top_k or limit or 10


def weight_pairs(text: str) -> dict[str, str]:
    """``"semantic=2, graph=0.5"`` → ``{"semantic": "2", "graph": "0.5"}`` (the CLI's and the MCP tool's text form).

    Raises:
        QueryError: a part without ``=``.
    """
    pairs = [p.partition("=") for p in text.split(",") if p.strip()]
    if any(not sep for _, sep, _ in pairs):
        raise QueryError("weights", "expected NAME=WEIGHT pairs separated by commas")
    return {k.strip(): v.strip() for k, _, v in pairs}


def tool_body(data: Mapping[str, Any]) -> dict[str, Any]:
    """A tool call's arguments as the JSON body of ``POST /v1/search``: arguments left out (None) dropped, and
    weights given as ``NAME=WEIGHT`` text read as numbers, so :func:`validate_body` checks both doors alike.

    Raises:
        QueryError: weights text that is not ``NAME=WEIGHT`` pairs of numbers.
    """
    body = {key: value for key, value in data.items() if value is not None}
    text = body.get("weights")
    if isinstance(text, str):
        try:
            body["weights"] = {name: float(w) for name, w in weight_pairs(text).items()}
        except ValueError:
            raise QueryError("weights", f"expected NAME=WEIGHT pairs of numbers, got {text!r}") from None
    return body


def _weights(value: Any, settings: Settings) -> dict[str, float] | None:
    """Lane name → weight, components expanded to their lanes (a lane named explicitly wins)."""
    if value is None:
        return None
    if isinstance(value, str | bytes):
        value = weight_pairs(_text(value, "weights"))
    if not isinstance(value, Mapping) or not value:
        raise QueryError("weights", "expected a non-empty mapping of lane or component → weight")
    out: dict[str, float] = {}
    named: dict[str, float] = {}
    for raw, w in value.items():
        key = _text(raw, "weights").strip()
        weight = _weight(w, f"weights.{key}")
        if key in settings.lanes:
            named[key] = weight
        elif key in _WEIGHT_COMPONENTS:
            kind = _WEIGHT_COMPONENTS[key]
            out.update({n: weight for n, lc in settings.lanes.items() if lc.kind is kind})
        else:
            valid = ", ".join([*_WEIGHT_COMPONENTS, *sorted(settings.lanes)])
            raise QueryError("weights", f"unknown lane or component {key!r}; valid: {valid}")
    out.update(named)
    kept = [lc.weight for name, lc in settings.lanes.items() if lc.enabled and name not in out]
    if not any(w > 0.0 for w in [*out.values(), *kept]):
        raise UnprocessableQueryError("weights", "at least one lane must keep a weight > 0")
    return dict(sorted(out.items()))


def _constraints(value: Any) -> Constraints:
    if value is None:
        return Constraints()
    if not isinstance(value, Mapping):
        raise QueryError("constraints", f"expected a mapping of constraint → value, got {type(value).__name__}")
    unknown = sorted(str(k) for k in value if k not in _CONSTRAINT_KEYS)
    if unknown:
        raise QueryError("constraints", f"unknown key(s) {', '.join(unknown)}; valid: {', '.join(_CONSTRAINT_KEYS)}")
    kwargs: dict[str, Any] = {}
    for key, valid in _CONSTRAINT_CHOICES.items():
        if value.get(key) is not None:
            kwargs[key] = _choice(value[key], f"constraints.{key}", valid)
    if value.get("citations_required") is not None:
        kwargs["citations_required"] = _bool(value["citations_required"], "constraints.citations_required")
    return Constraints(**kwargs)


def _lanes(value: Any, settings: Settings) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes):
        value = [p for p in _text(value, "lanes").split(",") if p.strip()]
    if not isinstance(value, list | tuple) or not value:
        raise QueryError("lanes", "expected a non-empty list of lane names")
    names: list[str] = []
    valid = sorted(settings.lanes)
    for raw in value:
        name = _text(raw, "lanes").strip()
        if name not in settings.lanes:
            raise QueryError("lanes", f"unknown lane {name!r}; valid: {', '.join(valid)}")
        if name not in names:
            names.append(name)
    return tuple(names)


def _mode(value: Any, settings: Settings) -> Mode:
    """A request's mode; a string outside the vocabulary runs as ``[engine] unknown_mode`` when that is set (the fusion
    policy's budget fallback), else it is refused."""
    valid = tuple(m.value for m in Mode)
    fallback = settings.engine.unknown_mode
    if fallback is not None and isinstance(value, str) and value not in valid:
        return fallback
    return Mode(_choice(value, "mode", valid))


def parse_request(data: Mapping[str, Any], settings: Settings) -> SearchRequest:
    """Validate a raw request mapping into a :class:`SearchRequest`.

    Raises:
        QueryError: naming the first bad field (``query``, ``mode``, ``top_k``, ``constraints.cost``, ...).
    """
    if not isinstance(data, Mapping):
        raise QueryError("request", f"expected an object, got {type(data).__name__}")
    if "offset" in data:
        raise QueryError("offset", "not supported: page with the opaque 'cursor' returned as next_cursor")
    unknown = sorted(str(k) for k in data if k not in KNOWN_KEYS)
    if unknown:
        raise QueryError("request", f"unknown key(s) {', '.join(unknown)}; valid: {', '.join(KNOWN_KEYS)}")
    query = _query(data.get("query"), settings)
    mode = settings.engine.default_mode
    if data.get("mode") is not None:
        mode = _mode(data["mode"], settings)
    top_k = _page_size(data, settings)
    cursor = None
    if data.get("cursor") not in (None, ""):
        cursor = _text(data["cursor"], "cursor").strip()
        if len(cursor) > 512:
            raise QueryError("cursor", "invalid cursor (too long)")
    fusion = None
    if data.get("fusion") is not None:
        fusion = FusionMode(_choice(data["fusion"], "fusion", tuple(m.value for m in FusionMode)))
    return SearchRequest(
        query=query,
        mode=mode,
        top_k=top_k,
        cursor=cursor,
        constraints=_constraints(data.get("constraints")),
        budget_ms=None if data.get("budget_ms") is None else _budget(data["budget_ms"]),
        strict=False if data.get("strict") is None else _bool(data["strict"], "strict"),
        fusion=fusion,
        lanes=_lanes(data.get("lanes"), settings),
        weights=_weights(data.get("weights"), settings),
        preflight=True if data.get("preflight") is None else _bool(data["preflight"], "preflight"),
        route=settings.router.default_route if data.get("route") is None else _choice(data["route"], "route", ROUTES),
    )


def check_request(request: SearchRequest, settings: Settings) -> SearchRequest:
    """The settings' limits on a request built in code (a :class:`SearchRequest` checks the rest when it is built):
    the query's size, the page size, known lanes; an empty ``route`` becomes the configured default route.

    Raises:
        QueryError: naming the field, with the message :func:`parse_request` gives.
    """
    _query(request.query, settings)
    _top_k(request.top_k, settings)
    if request.lanes is not None:
        _lanes(list(request.lanes), settings)
    if not request.route:
        request = replace(request, route=settings.router.default_route)
    return request


def validate_body(data: Any, settings: Settings) -> SearchRequest:
    """A decoded JSON body (``POST /v1/search``, the MCP ``query`` tool) → a :class:`SearchRequest`, validated by the
    contract's model (:func:`fabric.query.contract.search_model`: what the OpenAPI document publishes), then built
    by :func:`parse_request`.

    Raises:
        QueryError: naming the first field at fault (:class:`UnprocessableQueryError` for ``weights`` leaving every
            enabled lane at 0).
    """
    if not isinstance(data, Mapping):
        raise QueryError("request", f"expected an object, got {type(data).__name__}")
    try:
        body = search_model(settings).model_validate(data)
    except ValidationError as exc:
        raise query_error(exc) from None
    return parse_request(body.model_dump(exclude_unset=True), settings)
