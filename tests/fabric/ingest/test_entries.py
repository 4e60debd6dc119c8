"""The JSONL entry contract: the JSON Schema ``GET /openapi.json`` publishes for an entry (``IngestEntry``) and what
the JSONL loader accepts agree on every entry, valid or not (the schema checked by ``jsonschema``, as schemathesis
or a generated client does)."""

from __future__ import annotations

import json
import re
from collections import deque
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from fabric.core.errors import IngestError
from fabric.ingest.entries import DATE_PATTERN, URL_PATTERN, parse_published
from fabric.ingest.loaders import jsonl_chunks, load_source
from fabric.serve.openapi import entry_schema

VALIDATOR = Draft202012Validator(entry_schema())

ENTRIES: list[dict[str, Any]] = [
    {"id": "a", "text": "t"},
    {"id": 7, "text": "t"},
    {"id": 7.0, "text": "t"},
    {"id": 0, "text": "t"},
    {"id": 7.5, "text": "t"},
    {"id": True, "text": "t"},
    {"id": "", "text": "t"},
    {"id": ["a"], "text": "t"},
    {"id": "a"},
    {"text": "t"},
    {"id": "a", "text": ""},
    {"id": "a", "text": 5},
    {"id": "a", "text": "t", "title": None},
    {"id": "a", "text": "t", "title": ""},
    {"id": "a", "text": "t", "title": 5},
    {"id": "a", "text": "t", "colour": {"any": ["thing"]}},
    {"id": "a", "text": "t", "url": "https://example.org/a?b=c#d"},
    {"id": "a", "text": "t", "url": "HTTP://user:pw@example.org:8080/"},
    {"id": "a", "text": "t", "url": "https://example.org/ページ"},
    {"id": "a", "text": "t", "url": "https://例え.jp/"},
    {"id": "a", "text": "t", "url": "https://xn--r8jz45g.jp/"},
    {"id": "a", "text": "t", "url": "https://example.org/a\u202eb"},
    {"id": "a", "text": "t", "url": "https://example.org/a b"},
    {"id": "a", "text": "t", "url": "https://example.org/\n"},
    {"id": "a", "text": "t", "url": " https://example.org/"},
    {"id": "a", "text": "t", "url": "https://"},
    {"id": "a", "text": "t", "url": "http://[::1]/"},
    {"id": "a", "text": "t", "url": "javascript:alert(1)"},
    {"id": "a", "text": "t", "url": "https://e.org/" + "a" * 2034},
    {"id": "a", "text": "t", "url": "https://e.org/" + "a" * 2035},
    {"id": "a", "text": "t", "url": ""},
    {"id": "a", "text": "t", "url": None},
    {"id": "a", "text": "t", "url": 5},
    {"id": "a", "text": "t", "published_at": "2024-02-29"},
    {"id": "a", "text": "t", "published_at": "2023-02-29"},
    {"id": "a", "text": "t", "published_at": "1900-02-29"},
    {"id": "a", "text": "t", "published_at": "2024-04-31"},
    {"id": "a", "text": "t", "published_at": "2024-05-01T10:00"},
    {"id": "a", "text": "t", "published_at": "2024-05-01 10:00:00.123456789Z"},
    {"id": "a", "text": "t", "published_at": "2024-05-01T10:00:00+05:30"},
    {"id": "a", "text": "t", "published_at": "2024-05-01T24:00"},
    {"id": "a", "text": "t", "published_at": "2024-05-01\n"},
    {"id": "a", "text": "t", "published_at": "published 2024-05-01"},
    {"id": "a", "text": "t", "published_at": "0000-01-01"},
    {"id": "a", "text": "t", "published_at": "0001-01-01T00:00+01:00"},
    {"id": "a", "text": "t", "published_at": "0001-01-01T00:00Z"},
    {"id": "a", "text": "t", "published_at": "9999-12-31T23:59-01:00"},
    {"id": "a", "text": "t", "published_at": "2999-01-01"},
    {"id": "a", "text": "t", "published_at": "٢٠٢٤-05-01"},
    {"id": "a", "text": "t", "published_at": 20240501},
    {"id": "a", "text": "t", "published_at": ""},
    {"id": "a", "text": "t", "author": "A. N. Author"},
    {"id": "a", "text": "t", "author": ""},
    {"id": "a", "text": "t", "author": "\x1c"},
    {"id": "a", "text": "t", "author": None},
    {"id": "a", "text": "t", "source_kind": "web"},
    {"id": "a", "text": "t", "source_kind": "WEB"},
    {"id": "a", "text": "t", "source_kind": " web"},
    {"id": "a", "text": "t", "source_kind": "wEb\n"},
    {"id": "a", "text": "t", "source_kind": "news"},
    {"id": "a", "text": "t", "source_kind": ""},
    {"id": "a", "text": "t", "trust": "Untrusted"},
    {"id": "a", "text": "t", "trust": "maybe"},
    {"id": "a", "text": "t", "trust": "truſted"},
    {"id": "a", "text": "t", "trust": 1},
    {"id": "a", "text": "t", "source_ref": "mine"},
    {"id": "a", "text": "t", "source_ref": ["mine"]},
    {"id": "a", "text": "t", "triples": [[" Alpha", "acquired", "Beta "]]},
    {"id": "a", "text": "t", "triples": []},
    {"id": "a", "text": "t", "triples": [["a", "b"]]},
    {"id": "a", "text": "t", "triples": [["a", " ", "c"]]},
    {"id": "a", "text": "t", "triples": [[1, 2, 3]]},
    {"id": "a", "text": "t", "triples": "a b c"},
    {"id": "a", "text": "t", "triples": None},
]


def _loads(entry: dict[str, Any], tmp_path: Path) -> bool:
    path = tmp_path / "e.jsonl"
    path.write_text(json.dumps(entry) + "\n", encoding="utf-8")
    try:
        deque(jsonl_chunks(path), maxlen=0)
    except IngestError:
        return False
    return True


@pytest.mark.parametrize("entry", ENTRIES, ids=range(len(ENTRIES)))
def test_the_schema_is_the_loader(entry: dict[str, Any], tmp_path: Path) -> None:
    """An entry the published schema allows loads, and one it refuses is refused (never only one of them)."""
    assert VALIDATOR.is_valid(entry) is _loads(entry, tmp_path), entry


_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=12),
    st.sampled_from(["", " ", "web", "Trusted", "2024-02-29", "2024-02-30T10:00Z", "https://e.org/x", "http://"]),
    st.lists(st.lists(st.sampled_from(["a", " ", "", 1]), max_size=4), max_size=2),
)  # fmt: skip
_FIELDS = ["id", "text", "title", "url", "published_at", "author", "source_kind", "source_ref", "trust", "triples"]


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(entry=st.dictionaries(st.sampled_from(_FIELDS), _VALUE, max_size=len(_FIELDS)))
def test_random_entries_agree(entry: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> None:
    """Random mixes of field values: the schema and the loader agree on each."""
    assert VALIDATOR.is_valid(entry) is _loads(entry, tmp_path_factory.mktemp("e")), entry


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(text=st.from_regex(DATE_PATTERN))
def test_every_documented_date_parses(text: str) -> None:
    """Any text of the published date pattern is a date the loader reads (never an error past the check)."""
    value = parse_published(text)
    assert value is None if text == "" else value is not None and value.tzinfo is UTC


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(text=st.from_regex(URL_PATTERN))
def test_every_documented_url_has_a_host(text: str) -> None:
    """Any text of the published URL pattern is an http(s) URL whose host urlsplit reads (no ValueError)."""
    from urllib.parse import urlsplit

    if text:
        parts = urlsplit(text)
        assert parts.scheme.lower() in ("http", "https")
        assert parts.hostname


def test_values_as_loaded(tmp_path: Path) -> None:
    """Integer ids, offsets, case and the stripped metadata come out as documented."""
    row = {"id": 7.0, "text": "t", "published_at": "2024-05-01T10:00:00+02:00", "trust": "Trusted",
           "source_kind": "WEB", "author": " A ", "triples": [[" a", "b", "c "]], "url": ""}  # fmt: skip
    path = tmp_path / "e.jsonl"
    path.write_text(json.dumps(row) + "\n")
    chunk = load_source(path).chunks[0]
    assert (chunk.id, chunk.published_at) == ("7", datetime(2024, 5, 1, 8, tzinfo=UTC))
    assert (chunk.trust.value, chunk.source_kind.value) == ("trusted", "web")
    assert chunk.metadata == {"author": "A", "triples": [["a", "b", "c"]]}
    assert chunk.url == "doc:jsonl:e.jsonl/7"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"id": "a"}, "missing field text"),
        ({"id": "", "text": "t"}, "missing field id"),
        ({"id": "a", "text": "t", "url": "ftp://x"}, "url: expected an absolute http(s) URL, got 'ftp://x'"),
        ({"id": "a", "text": "t", "published_at": "2023-02-29"}, "published_at: expected YYYY-MM-DD"),
        ({"id": "a", "text": "t", "trust": "maybe"}, "trust: expected one of trusted, untrusted, got 'maybe'"),
        ({"id": "a", "text": "t", "triples": [["a", "b"]]}, "triples[0]: expected a list of [subject, predicate"),
        ({"id": True, "text": "t"}, "id: expected a non-empty string or an integer, got True"),
    ],
)
def test_refusals_name_line_and_field(entry: dict[str, Any], message: str, tmp_path: Path) -> None:
    """The loader's refusal names file, line and field in one line."""
    path = tmp_path / "e.jsonl"
    path.write_text(json.dumps({"id": "ok", "text": "t"}) + "\n" + json.dumps(entry) + "\n")
    with pytest.raises(IngestError, match=re.escape(f"e.jsonl:2: {message}")):
        load_source(path)
