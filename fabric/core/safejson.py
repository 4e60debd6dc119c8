"""JSON from untrusted sources (request bodies, JSONL lines, upstream answers): bounded depth, valid Unicode.

``json.loads`` raises :class:`RecursionError` (not :class:`ValueError`) on deep nesting (about 1,000 levels), and
decodes ``"\\ud800"`` escapes into lone surrogates that later fail at the first UTF-8 encode (a store write, a
response). :func:`loads` turns both into :class:`JSONInputError` (a :class:`ValueError`, so existing
``except ValueError`` handlers answer 400 / ``LaneBadResponse``) naming the place, e.g. ``entries[3].text``.

Cheap on the common case: the nesting walk runs only when the text holds more opening brackets than
``max_depth`` (one C-speed count), the Unicode walk only when a ``\\uD800``–``\\uDFFF`` escape occurs
(one regex search). A body nested 100,000 deep is refused by the parser's own recursion guard within a
fraction of a millisecond.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["DEFAULT_MAX_DEPTH", "MAX_INT_DIGITS", "JSONInputError", "check_text", "loads"]

DEFAULT_MAX_DEPTH = 64
"""Deepest nesting accepted by default (requests and entries need a handful of levels)."""

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_B = re.compile(rb"\\u[dD][89a-fA-F]")


class JSONInputError(ValueError):
    """Untrusted JSON was refused.

    Attributes:
        where: the JSON path at fault (``""`` for the document, ``entries[3].text``, ...).
        reason: what is wrong.
    """

    def __init__(self, where: str, reason: str) -> None:
        self.where = where
        self.reason = reason
        super().__init__(f"{where}: {reason}" if where else reason)


def check_text(value: str, where: str = "") -> str:
    """``value`` unchanged if it encodes as UTF-8.

    Raises:
        JSONInputError: a lone surrogate (naming the character position).
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise JSONInputError(where, f"invalid Unicode: lone surrogate at character {exc.start}") from None
    return value


def _encodes(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _step(where: str, key: object) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else str(key)


def _walk(doc: Any, *, max_depth: int, unicode: bool) -> None:
    """Iterative walk: depth above ``max_depth`` or (with ``unicode``) a lone surrogate raises."""
    stack: list[tuple[Any, str, int]] = [(doc, "", 0)]
    while stack:
        node, where, depth = stack.pop()
        if isinstance(node, str):
            if unicode:
                check_text(node, where)
            continue
        if not isinstance(node, dict | list):
            continue
        if depth >= max_depth:
            short = where if len(where) <= 60 else where[:60] + "…"
            raise JSONInputError(short, f"nested deeper than {max_depth} levels")
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            if unicode and isinstance(key, str):
                check_text(key, _step(where, "<key>"))
            stack.append((value, _step(where, key), depth + 1))


def _no_constant(name: str) -> Any:
    raise JSONInputError("", f"invalid JSON: {name} is not a JSON number")


MAX_INT_DIGITS = 64
"""Longest integer accepted (Python refuses to convert past 4,300 digits; no field of ours needs more than 20)."""


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise JSONInputError("", f"a number of {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def loads(
    data: str | bytes | bytearray,
    *,
    max_depth: int | None = DEFAULT_MAX_DEPTH,
    unicode: bool = True,
    allow_nan: bool = False,
) -> Any:
    """Parse untrusted JSON.

    Args:
        data: the JSON text (bytes are decoded as UTF-8 by ``json.loads``).
        max_depth: deepest nesting accepted (None: only the parser's own recursion guard).
        unicode: refuse strings holding lone surrogates.
        allow_nan: accept the non-JSON constants ``NaN``, ``Infinity`` and ``-Infinity``.

    Raises:
        JSONInputError: invalid JSON, invalid UTF-8, ``NaN``/``Infinity`` (unless allowed), too deep, an integer of
            more than :data:`MAX_INT_DIGITS` digits, or a lone surrogate (a ``ValueError``).
    """
    try:
        if allow_nan:
            doc = json.loads(data, parse_int=_bounded_int)
        else:
            doc = json.loads(data, parse_constant=_no_constant, parse_int=_bounded_int)
    except JSONInputError:
        raise
    except RecursionError:
        raise JSONInputError("", "nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise JSONInputError("", f"not valid UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise JSONInputError("", f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    if isinstance(data, str):
        deep = max_depth is not None and data.count("[") + data.count("{") > max_depth
        bad_unicode = unicode and (_SURROGATE_ESCAPE.search(data) is not None or not _encodes(data))
    else:
        deep = max_depth is not None and data.count(b"[") + data.count(b"{") > max_depth
        bad_unicode = unicode and _SURROGATE_ESCAPE_B.search(data) is not None
    if deep or bad_unicode:
        _walk(doc, max_depth=max_depth if max_depth is not None else 1 << 30, unicode=bad_unicode)
    return doc
