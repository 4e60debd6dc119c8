"""The search contract: the model that validates a JSON body and the JSON Schema it writes agree on every body, the
valid ones and the invalid ones (the schema checked by ``jsonschema``, as a generated client or schemathesis does)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from fabric.core.errors import QueryError, UnprocessableQueryError
from fabric.query.contract import json_schema, search_model
from fabric.query.validation import parse_request, validate_body
from fabric.settings import Settings, load_settings
from fusion.cursor import encode_cursor


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """The default settings over a tmp home (keyword, vector, graph enabled; web lanes configured, disabled)."""
    return load_settings(env={"FABRIC_HOME": str(tmp_path / "home")})


CURSOR = encode_cursor(10, "another query", b"another engine")

BODIES: list[dict[str, Any]] = [
    {"query": "q"},
    {"query": "q", "top_k": 3},
    {"query": "q", "top_k": 3.0},
    {"query": "q", "top_k": 3.5},
    {"query": "q", "top_k": "3"},
    {"query": "q", "top_k": True},
    {"query": "q", "top_k": 0},
    {"query": "q", "top_k": 201},
    {"query": "q", "top_k": None},
    {"query": "q", "limit": 4},
    {"query": "q", "limit": 4, "top_k": 4},
    {"query": "q", "mode": "simple"},
    {"query": "q", "mode": "SIMPLE"},
    {"query": "q", "mode": " simple"},
    {"query": "q", "strict": "true"},
    {"query": "q", "strict": False},
    {"query": "q", "budget_ms": 0},
    {"query": "q", "budget_ms": 120_000},
    {"query": "q", "budget_ms": 120_001},
    {"query": "q", "constraints": {"cost": "low", "citations_required": True}},
    {"query": "q", "constraints": {"cost": None}},
    {"query": "q", "constraints": {"colour": "red"}},
    {"query": "q", "lanes": ["keyword", "web"]},
    {"query": "q", "lanes": []},
    {"query": "q", "lanes": "keyword,vector"},
    {"query": "q", "weights": {"semantic": 2, "graph": 0.5}},
    {"query": "q", "weights": {"semantic": 0, "lexical": 0, "graph": 0}},
    {"query": "q", "weights": {"vector": 0, "keyword": 0, "graph": 0}},
    {"query": "q", "weights": {"vector": 0, "keyword": 0, "graph": 0, "semantic": 1}},
    {"query": "q", "weights": {"vector": 1, "semantic": 0, "lexical": 0, "graph": 0}},
    {"query": "q", "weights": {"web": 0}},
    {"query": "q", "weights": {}},
    {"query": "q", "weights": "semantic=2"},
    {"query": "q", "cursor": CURSOR},
    {"query": "q", "cursor": "c1abc"},
    {"query": "q", "offset": 10},
    {"query": "q", "colour": "red"},
    {"query": " "},
    {"query": "\x1c"},
    {"query": ""},
    {"query": "\U0001f600" * 1024},
    {"query": "q" * 1025},
    {},
]


def _accepted(body: dict[str, Any], settings: Settings) -> bool:
    try:
        validate_body(body, settings)
    except QueryError:
        return False
    return True


@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
def test_the_schema_is_the_validator(settings: Settings, body: dict[str, Any]) -> None:
    """A body the published schema allows is accepted, and one it refuses is refused (never only one of them)."""
    schema = json_schema(search_model(settings))
    assert Draft202012Validator(schema).is_valid(body) is _accepted(body, settings), body


def test_a_cursor_of_another_query_is_well_formed(settings: Settings) -> None:
    """A cursor of the published form passes the contract; the engine refuses it later as stale (HTTP 409)."""
    assert validate_body({"query": "q", "cursor": CURSOR}, settings).cursor == CURSOR
    with pytest.raises(QueryError, match="malformed"):
        validate_body({"query": "q", "cursor": CURSOR + "A"}, settings)


def test_refusals_name_the_field(settings: Settings) -> None:
    """Each refusal names the field at fault, in the API's words."""
    cases = {
        "top_k": ({"query": "q", "top_k": "3"}, "expected an integer"),
        "mode": ({"query": "q", "mode": "SIMPLE"}, "unknown value 'SIMPLE'"),
        "limit": ({"query": "q", "top_k": 3, "limit": 3}, "give one"),
        "constraints.cost": ({"query": "q", "constraints": {"cost": "free"}}, "unknown value 'free'"),
        "offset": ({"query": "q", "offset": 1}, "cursor"),
        "query": ({"query": " "}, "whitespace"),
        "weights": ({"query": "q", "weights": {"nope": 1}}, "unknown value 'nope'"),
    }
    for field, (body, words) in cases.items():
        with pytest.raises(QueryError) as info:
            validate_body(body, settings)
        assert (info.value.field, words in info.value.message) == (field, True), info.value
    with pytest.raises(UnprocessableQueryError, match="weight > 0"):
        validate_body({"query": "q", "weights": {"semantic": 0, "lexical": 0, "graph": 0}}, settings)


def test_every_door_has_the_same_query_limit(settings: Settings) -> None:
    """The CLI and Python door (parse_request) counts the query in characters too: max_query_bytes // 4."""
    limit = search_model(settings).model_json_schema()["properties"]["query"]["maxLength"]
    assert parse_request({"query": "q" * limit}, settings).query == "q" * limit
    with pytest.raises(QueryError, match=f"limit {limit} characters"):
        parse_request({"query": "q" * (limit + 1)}, settings)
