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

from fabric.core.checks import MAX_BUDGET_MS, MAX_WEIGHT, page_size, query_text
from fabric.core.checks import budget_ms as _budget
from fabric.core.checks import choice as _choice
from fabric.core.checks import text as _text
from fabric.core.checks import weight as _weight
from fabric.core.errors import QueryError, UnprocessableQueryError
from fabric.core.models import Constraints, FusionMode, LaneKind, Mode, SearchRequest
from fabric.core.strategies import ROUTES
from fabric.settings import Settings

__all__ = ["KNOWN_KEYS", "MAX_BUDGET_MS", "MAX_WEIGHT", "check_request", "parse_request"]

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


_WEIGHT_COMPONENTS: Mapping[str, LaneKind] = {
    "lexical": LaneKind.KEYWORD,
    "semantic": LaneKind.VECTOR,
    "graph": LaneKind.GRAPH,
}


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
    text = query_text(value)
    size = len(text.encode("utf-8"))
    limit = settings.engine.max_query_bytes
    if size > limit:
        raise UnprocessableQueryError("query", f"too long: {size} bytes (limit {limit} bytes)")
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


def _weights(value: Any, settings: Settings) -> dict[str, float] | None:
    """Lane name → weight, components expanded to their lanes (a lane named explicitly wins)."""
    if value is None:
        return None
    if isinstance(value, str | bytes):
        pairs = [p.partition("=") for p in _text(value, "weights").split(",") if p.strip()]
        if any(not sep for _, sep, _ in pairs):
            raise QueryError("weights", "expected NAME=WEIGHT pairs separated by commas")
        value = {k.strip(): v.strip() for k, _, v in pairs}
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
        mode = Mode(_choice(data["mode"], "mode", tuple(m.value for m in Mode)))
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
