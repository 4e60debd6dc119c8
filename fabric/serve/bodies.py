"""Typed models of the data routes' JSON bodies: they validate ``POST /v1/cite`` and write its JSON Schema in
``GET /openapi.json`` (:mod:`fabric.serve.openapi`), so the document and the route cannot disagree. The search body's
model is :mod:`fabric.query.contract`'s; the query of a cite body is the same field, with the same limits.

A cite body is ``{"answer", "items"}`` (result items, as ``POST /v1/search`` answers them: more keys are allowed and
kept) or ``{"answer", "query", "top_k"}`` (the engine searches first), with ``threshold``, ``max_per_sentence`` and
``semantic``; never both ``items`` and ``query`` (each variant refuses the other's keys).
"""

from __future__ import annotations

from typing import Annotated, Any, cast

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from fabric.core.errors import QueryError
from fabric.query.contract import NOT_BLANK, Body, query_error, query_field, whole
from fabric.settings import Settings

__all__ = ["CITE_LIMITS", "cite_adapter", "parse_cite"]

CITE_LIMITS = {"items": 100, "answer_chars": 20_000, "max_per_sentence": 10}
"""Bounds of a ``POST /v1/cite`` body."""


class CiteItem(Body):
    """One result item: a non-empty ``id``; the texts and the score when given (other keys are kept)."""

    model_config = ConfigDict(extra="allow")

    id: Annotated[str, Field(min_length=1)]
    title: str | None = None
    text: str | None = None
    snippet: str | None = None
    url: str | None = None
    domain: str | None = None
    published_at: Annotated[str | None, Field(description="ISO 8601; another text is read as no date.")] = None
    doc_id: str | None = None
    author: str | None = None
    score_total: float | None = None


_ADAPTERS: dict[tuple[int, int], TypeAdapter[Any]] = {}


def _variant(name: str, settings: Settings, **fields: Any) -> type[Body]:
    from pydantic import create_model

    common: dict[str, Any] = {
        "answer": (
            Annotated[str, Field(min_length=1, max_length=CITE_LIMITS["answer_chars"], pattern=NOT_BLANK)],
            ...,
        ),
        "threshold": (Annotated[float, Field(ge=0.01, le=1, allow_inf_nan=False)], None),
        "max_per_sentence": (whole(ge=1, le=CITE_LIMITS["max_per_sentence"]), None),
        "semantic": (bool, None),
    }
    return create_model(name, __base__=Body, **common, **fields)


def cite_adapter(settings: Settings) -> TypeAdapter[Any]:
    """The validator of a cite body under ``settings`` (its query's limits and ``top_k``'s ceiling)."""
    key = (settings.engine.max_query_bytes, settings.engine.max_top_k)
    adapter = _ADAPTERS.get(key)
    if adapter is None:
        items = Annotated[list[CiteItem], Field(min_length=1, max_length=CITE_LIMITS["items"])]
        by_items = _variant("CiteByItems", settings, items=(items, ...))
        by_query = _variant(
            "CiteByQuery", settings, query=(query_field(settings), ...),
            top_k=(whole(ge=1, le=settings.engine.max_top_k), None),
        )  # fmt: skip
        adapter = _ADAPTERS[key] = TypeAdapter(cast(Any, by_items | by_query))
    return adapter


def parse_cite(data: Any, settings: Settings) -> dict[str, Any]:
    """A decoded ``POST /v1/cite`` body, validated: the fields given, defaults applied (``threshold`` 0.7,
    ``max_per_sentence`` 3, ``semantic`` false, ``top_k`` 10); ``items`` as plain mappings.

    Raises:
        QueryError: naming the first field at fault.
    """
    if not isinstance(data, dict):
        raise QueryError("body", "expected a JSON object")
    if ("items" in data) == ("query" in data):
        raise QueryError("body", "expected exactly one of items (result items) or query (search first)")
    try:
        body = cite_adapter(settings).validate_python(data)
    except ValidationError as exc:
        raise query_error(_one_variant(exc, "items" in data), root="body") from None
    out: dict[str, Any] = {"threshold": 0.7, "max_per_sentence": 3, "semantic": False, "top_k": 10}
    out |= body.model_dump(exclude_unset=True)
    return out


def _one_variant(exc: ValidationError, by_items: bool) -> ValidationError | list[Any]:
    """The errors of the variant the body meant (a union reports both; the first path names the variant)."""
    wanted = "CiteByItems" if by_items else "CiteByQuery"
    errors = [{**e, "loc": e["loc"][1:]} for e in exc.errors(include_url=False) if e["loc"] and e["loc"][0] == wanted]
    return errors or exc
