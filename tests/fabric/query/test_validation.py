"""Tests for request validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as fuzz_settings
from hypothesis import strategies as st

from fabric.core import safejson
from fabric.core.errors import QueryError
from fabric.core.models import FusionMode, Mode
from fabric.core.search_models import SearchRequest
from fabric.query.validation import KNOWN_KEYS, parse_request
from fabric.settings import Settings
from tests.support.settings import make_settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path, {"keyword": {}, "vector": {}})


def _field(data: dict, settings: Settings) -> str:
    with pytest.raises(QueryError) as info:
        parse_request(data, settings)
    return info.value.field


class TestQuery:
    def test_valid_request_parses(self, settings: Settings) -> None:
        """A full valid request becomes a typed SearchRequest."""
        req = parse_request(
            {
                "query": "hello",
                "mode": "research",
                "top_k": 5,
                "constraints": {"cost": "low", "citations_required": True},
                "budget_ms": 300,
                "strict": True,
                "fusion": "append_fill",
                "lanes": ["keyword"],
            },
            settings,
        )
        assert (req.mode, req.top_k, req.budget_ms, req.strict) == (Mode.RESEARCH, 5, 300.0, True)
        assert req.constraints.cost == "low"
        assert req.constraints.citations_required
        assert req.fusion is FusionMode.APPEND_FILL
        assert req.lanes == ("keyword",)

    def test_missing_query_rejected(self, settings: Settings) -> None:
        """A request without a query names the query field."""
        assert _field({}, settings) == "query"

    @pytest.mark.parametrize("query", ["", "   ", "\t\n"])
    def test_empty_or_whitespace_query_rejected(self, settings: Settings, query: str) -> None:
        """Empty and whitespace-only queries are refused."""
        assert _field({"query": query}, settings) == "query"

    def test_oversized_query_rejected(self, settings: Settings) -> None:
        """A query over max_query_bytes // 4 characters is refused with both limits in the message; one of that
        many characters passes whatever they are (4 UTF-8 bytes at most each)."""
        limit = settings.engine.max_query_bytes // 4
        with pytest.raises(QueryError, match=f"limit {limit} characters, {settings.engine.max_query_bytes} bytes"):
            parse_request({"query": "é" * (limit + 1)}, settings)
        assert parse_request({"query": "\U0001f600" * limit}, settings).query

    def test_non_string_query_rejected(self, settings: Settings) -> None:
        """A number is not a query."""
        assert _field({"query": 42}, settings) == "query"

    def test_invalid_utf8_bytes_rejected(self, settings: Settings) -> None:
        """Bytes that are not UTF-8 are refused."""
        with pytest.raises(QueryError, match="UTF-8"):
            parse_request({"query": b"caf\xe9"}, settings)

    def test_valid_utf8_bytes_accepted(self, settings: Settings) -> None:
        """UTF-8 bytes are decoded."""
        assert parse_request({"query": "café".encode()}, settings).query == "café"

    def test_lone_surrogate_rejected(self, settings: Settings) -> None:
        """A string with a lone surrogate cannot be encoded and is refused."""
        with pytest.raises(QueryError, match="surrogate"):
            parse_request({"query": "abc\udcff"}, settings)


class TestFields:
    def test_unknown_mode_lists_valid(self, settings: Settings) -> None:
        """An unknown mode names the valid ones."""
        with pytest.raises(QueryError, match="simple, technical, research, multimedia"):
            parse_request({"query": "q", "mode": "fast"}, settings)

    @pytest.mark.parametrize("top_k", [0, -1, 201, "x", 1.5, True])
    def test_bad_top_k_rejected(self, settings: Settings, top_k: object) -> None:
        """top_k must be an integer in [1, max_top_k]."""
        assert _field({"query": "q", "top_k": top_k}, settings) == "top_k"

    def test_offset_points_to_cursor(self, settings: Settings) -> None:
        """offset is refused with a pointer to cursor."""
        with pytest.raises(QueryError, match="cursor") as info:
            parse_request({"query": "q", "offset": 10}, settings)
        assert info.value.field == "offset"

    def test_unknown_constraint_key_rejected(self, settings: Settings) -> None:
        """Unknown constraint keys are listed with the valid ones."""
        with pytest.raises(QueryError, match="valid: time_range"):
            parse_request({"query": "q", "constraints": {"colour": "red"}}, settings)

    def test_unknown_constraint_value_rejected(self, settings: Settings) -> None:
        """An unknown constraint value names its field and the valid values."""
        with pytest.raises(QueryError, match="low, medium, high") as info:
            parse_request({"query": "q", "constraints": {"cost": "free"}}, settings)
        assert info.value.field == "constraints.cost"

    @pytest.mark.parametrize("budget", [0, -5, 10**7, "soon", float("nan")])
    def test_bad_budget_rejected(self, settings: Settings, budget: object) -> None:
        """budget_ms must be positive and sane."""
        assert _field({"query": "q", "budget_ms": budget}, settings) == "budget_ms"

    def test_unknown_lane_rejected(self, settings: Settings) -> None:
        """Lane names must be configured lanes."""
        with pytest.raises(QueryError, match="keyword, vector"):
            parse_request({"query": "q", "lanes": ["keyword", "nope"]}, settings)

    def test_lanes_as_comma_string(self, settings: Settings) -> None:
        """A comma-separated lane string is accepted (CLI form)."""
        assert parse_request({"query": "q", "lanes": "keyword,vector"}, settings).lanes == ("keyword", "vector")

    def test_unknown_fusion_rejected(self, settings: Settings) -> None:
        """An unknown fusion mode lists the valid ones."""
        with pytest.raises(QueryError, match="rrf"):
            parse_request({"query": "q", "fusion": "magic"}, settings)

    def test_unknown_top_level_key_rejected(self, settings: Settings) -> None:
        """Unknown top-level keys are refused."""
        with pytest.raises(QueryError, match="unknown key"):
            parse_request({"query": "q", "colour": 1}, settings)

    def test_non_mapping_rejected(self, settings: Settings) -> None:
        """A request must be an object."""
        assert _field(["q"], settings) == "request"  # type: ignore[arg-type]


_ANY_TEXT = st.text(alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF), max_size=30)
_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | _ANY_TEXT | st.sampled_from(["simple", "rrf", "web"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_ANY_TEXT, inner, max_size=3),
    max_leaves=12,
)


class TestFuzz:
    @given(data=st.dictionaries(st.sampled_from([*KNOWN_KEYS, "offset", "x"]), _VALUE, max_size=6))
    def test_any_body_is_a_request_or_a_query_error(self, data: dict[str, object]) -> None:
        """Whatever the JSON body, validation returns a request or raises QueryError naming a field."""
        settings = make_settings(Path("/nonexistent-home"), {"keyword": {}, "vector": {}})
        try:
            parse_request(data, settings)
        except QueryError as exc:
            failed = exc
        else:
            return
        assert failed.field


class TestBodyFuzz:
    @fuzz_settings(max_examples=200)
    @given(body=st.binary(max_size=300) | _VALUE.map(lambda v: json.dumps({"query": "q", "constraints": v}).encode()))
    def test_any_body_bytes_are_a_request_or_a_typed_error(self, body: bytes) -> None:
        """The service's path, bytes → JSON → request: only JSONInputError or QueryError, whatever the bytes."""
        settings_ = make_settings(Path("/nonexistent-home"), {"keyword": {}, "vector": {}})
        outcome: object
        try:
            outcome = parse_request(safejson.loads(body), settings_)
        except (safejson.JSONInputError, QueryError) as exc:
            outcome = exc
        if isinstance(outcome, safejson.JSONInputError):
            assert outcome.reason
        elif isinstance(outcome, QueryError):
            assert outcome.field
        else:
            assert isinstance(outcome, SearchRequest)
            assert outcome.query.strip()
