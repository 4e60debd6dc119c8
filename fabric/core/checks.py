"""Checks of request fields that need no settings, shared by :class:`~fabric.core.search_models.SearchRequest`
(which runs them when it is built) and the request validation of every door (:mod:`fabric.query.validation`), so
that the Python API, the CLI, HTTP and MCP refuse the same input with the same message."""

from __future__ import annotations

import math
from typing import Any

from fabric.core.errors import QueryError

__all__ = ["MAX_BUDGET_MS", "MAX_WEIGHT", "budget_ms", "choice", "page_size", "query_text", "text", "weight"]

MAX_WEIGHT = 100.0
"""The largest per-request lane weight."""
MAX_BUDGET_MS = 120_000.0
"""The largest per-request total budget (two minutes)."""


def text(value: Any, field: str) -> str:
    """``value`` as valid UTF-8 text (bytes are decoded strictly)."""
    if isinstance(value, bytes | bytearray):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise QueryError(field, f"not valid UTF-8 (byte {exc.start})") from None
    if not isinstance(value, str):
        raise QueryError(field, f"expected a string, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise QueryError(field, f"not valid UTF-8 (lone surrogate at character {exc.start})") from None
    return value


def choice(value: Any, field: str, valid: tuple[str, ...]) -> str:
    """One of ``valid`` (case and surrounding spaces ignored)."""
    found = text(value, field).strip().lower()
    if found not in valid:
        raise QueryError(field, f"unknown value {value!r}; valid: {', '.join(valid)}")
    return found


def query_text(value: Any) -> str:
    """The query: required, valid UTF-8, not blank (its size limit is a setting)."""
    if value is None:
        raise QueryError("query", "required")
    found = text(value, "query")
    if not found.strip():
        raise QueryError("query", "must not be empty or whitespace only")
    return found


def page_size(value: Any, field: str = "top_k") -> int:
    """A page size: a whole number >= 1 (its upper bound is a setting)."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():  # JSON Schema: 138.0 is an integer
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise QueryError(field, f"expected an integer, got {value!r}")
    if value < 1:
        raise QueryError(field, f"must be >= 1, got {value}")
    return value


def budget_ms(value: Any) -> float:
    """A total budget in milliseconds: a number in (0, :data:`MAX_BUDGET_MS`]."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise QueryError("budget_ms", f"expected a number of milliseconds, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise QueryError("budget_ms", f"expected a number of milliseconds, got {value!r}")
    budget = float(value)
    if not budget > 0:  # also rejects NaN
        raise QueryError("budget_ms", f"must be > 0, got {value!r}")
    if budget > MAX_BUDGET_MS:
        raise QueryError("budget_ms", f"must be <= {MAX_BUDGET_MS:.0f} ms, got {value!r}")
    return budget


def weight(value: Any, field: str) -> float:
    """A lane weight: a number in [0, :data:`MAX_WEIGHT`]."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise QueryError(field, f"expected a number, got {value!r}") from None
    ok = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
    if not ok or not 0.0 <= float(value) <= MAX_WEIGHT:
        raise QueryError(field, f"expected a number in [0, {MAX_WEIGHT:g}], got {value!r}")
    return float(value)
