"""The JSONL entry: one pydantic model that checks every entry the JSONL loader reads (``fabric ingest``,
``POST /v1/ingest``, MCP ``ingest``, the Python API) and writes the entry's JSON Schema in ``GET /openapi.json``
(``IngestEntry``), so what the document allows is exactly what the loader accepts (``tests/fabric/ingest/
test_entries.py`` checks both ways with ``jsonschema``; ``.ci/schemathesis`` against the live service).

Every rule is one a JSON Schema states (patterns run with Python's ``re``, as ``jsonschema`` runs them):

- ``id``: a non-empty string or an integer (``7`` and ``7.0`` are the id ``"7"``); ``text``: a non-empty string;
- ``title``, ``source_ref``: strings; ``author``: a string that is not only whitespace; ``triples``: a list of
  ``[subject, predicate, object]`` strings that are not only whitespace;
- ``url``: an absolute ``http(s)`` URL of at most :data:`URL_MAX_CHARS` characters: an ASCII host (an IDN in
  punycode), optional ASCII user info and port, then a path, query or fragment of visible characters (no space,
  control, format, private-use or bidi character);
- ``published_at``: an ISO 8601 date or date and time, ``YYYY-MM-DD[(T| )HH:MM[:SS[.fff]][Z|±HH:MM]]``, a real
  calendar date from year 1 (no numeric offset on 0001-01-01 and 9999-12-31, which could leave the calendar); a
  time without offset is UTC. A date in the future is accepted as given (fusion's recency counts it as age 0);
- ``source_kind``, ``trust``: one of their values, ASCII case-insensitive.

``null`` and ``""`` mean "not given" for every optional field but ``author`` and ``triples`` (``null`` only). Other
keys are ignored.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from fabric.core.models import SourceKind, Trust

__all__ = ["DATE_PATTERN", "URL_MAX_CHARS", "URL_PATTERN", "Entry", "entry_error", "entry_id", "parse_published"]

URL_MAX_CHARS = 2048
_NOT_BLANK = r"[^\s\x1c-\x1f\x85]"
"""Some character ``str.strip`` keeps (as :data:`fabric.query.contract.NOT_BLANK`; ``query`` may not import it)."""
_END = r"(?![\s\S])"
"""The end of the text (``$`` would also match before a final newline)."""
_HOST = r"[A-Za-z0-9._~!$&'()*+,;=%-]"
_VISIBLE = (
    "[\x21-\x7e\xa1-\xac\xae-\u061b\u061d-\u167f\u1681-\u180d\u180f-\u1fff\u2010-\u2027\u2030-\u205e"
    "\u2070-\u2fff\u3001-\ud7ff\uf900-\ufdcf\ufdf0-\ufefe\uff00-\ufff8\U00010000-\U000dffff]"
)
"""A visible character: ASCII graphics, and the IRI characters of RFC 3987 but spaces, format and bidi controls."""
URL_PATTERN = (
    rf"^(?:[Hh][Tt][Tt][Pp][Ss]?://(?:[A-Za-z0-9._~!$&'()*+,;=%:-]*@)?{_HOST}+(?::[0-9]*)?(?:[/?#]{_VISIBLE}*)?)?{_END}"
)
"""An entry's ``url`` (the empty text: no URL)."""
_MONTH_DAY = (
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
_LEAP_DAY = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29"
_ZONE = "(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_TIME = rf"(?:[T ](?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]+)?)?{_ZONE}?)?"
DATE_PATTERN = (
    rf"^(?:(?!0000)(?!(?:0001-01-01|9999-12-31)[T ][0-9:.]*[+-])(?:[0-9]{{4}}-{_MONTH_DAY}|{_LEAP_DAY}){_TIME})?{_END}"
)
"""An entry's ``published_at`` (the empty text: no date)."""


def _choices(values: Any) -> str:
    """A pattern of ``values`` (or the empty text), ASCII case-insensitive."""
    words = ["".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in v) for v in values]
    return f"^(?:{'|'.join(words)})?{_END}"


def _whole(value: Any) -> Any:
    """JSON Schema counts ``7.0`` as an integer: so does the entry."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


_Text = Annotated[str, Field(min_length=1)]
_NotBlank = Annotated[str, Field(pattern=_NOT_BLANK)]


class Entry(BaseModel):
    """One JSONL entry, as the loader reads it (see the module docstring)."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True, regex_engine="python-re")

    id: _Text | Annotated[int, BeforeValidator(_whole)]
    text: _Text
    title: str | None = None
    url: Annotated[str, Field(max_length=URL_MAX_CHARS, pattern=URL_PATTERN)] | None = None
    published_at: Annotated[str, Field(pattern=DATE_PATTERN)] | None = None
    author: _NotBlank | None = None
    source_kind: Annotated[str, Field(pattern=_choices(k.value for k in SourceKind))] | None = None
    source_ref: str | None = None
    trust: Annotated[str, Field(pattern=_choices(t.value for t in Trust))] | None = None
    triples: list[Annotated[list[_NotBlank], Field(min_length=3, max_length=3)]] | None = None


def entry_id(raw: Any) -> str:
    """The id an entry's ``id`` value stands for (``7`` and ``7.0``: ``"7"``)."""
    return str(_whole(raw))


def parse_published(text: str | None) -> datetime | None:
    """A valid ``published_at`` (:data:`DATE_PATTERN`) as a UTC datetime; None for no date."""
    if not text:
        return None
    value = datetime.fromisoformat(text)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


_EXPECTED = {
    "id": "expected a non-empty string or an integer",
    "text": "expected a non-empty string",
    "url": "expected an absolute http(s) URL",
    "published_at": "expected YYYY-MM-DD[THH:MM[:SS][Z|+HH:MM]] (a real date)",
    "author": "expected a non-empty string",
    "source_kind": f"expected one of {', '.join(k.value for k in SourceKind)}",
    "trust": f"expected one of {', '.join(t.value for t in Trust)}",
    "triples": "expected a list of [subject, predicate, object] as non-empty strings",
}


def entry_error(exc: ValidationError) -> str:
    """The first refusal of ``exc`` in the loader's words: ``missing field id``, ``url: expected ...``."""
    err = exc.errors(include_url=False)[0]
    loc = err["loc"]  # the field, then list indexes or a union's branch names (constrained-str, ...)
    name = str(loc[0]) if loc else "entry"
    if err["type"] == "missing" or (name in ("id", "text") and err.get("input") == ""):
        return f"missing field {name}"
    field = name + "".join(f"[{p}]" for p in loc[1:2] if isinstance(p, int))
    value = err.get("input")
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    return f"{field}: {_EXPECTED.get(name, 'expected a string')}, got {shown}"
