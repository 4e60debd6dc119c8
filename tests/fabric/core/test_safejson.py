"""Untrusted JSON: bounded depth, valid Unicode, no NaN; every refusal a ValueError naming the place."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import fabric.core.safejson as mod
from fabric.core.safejson import JSONInputError, check_text, loads


class TestLoads:
    def test_plain_document(self) -> None:
        """Ordinary JSON (valid surrogate pairs included) parses as json.loads would."""
        assert loads(b'{"a": [1, 2, {"b": "\\ud83d\\ude00"}]}') == {"a": [1, 2, {"b": "\U0001f600"}]}

    @pytest.mark.parametrize("data", [b"[" * 100_000 + b"]" * 100_000, "{" + '"a":{' * 5000 + "1" + "}" * 5001])
    def test_parser_recursion_guard_is_a_value_error(self, data: str | bytes) -> None:
        """Nesting past the parser's recursion guard is JSONInputError, not RecursionError."""
        with pytest.raises(JSONInputError, match="nested too deeply"):
            loads(data)

    def test_depth_limit_names_the_place(self) -> None:
        """A document deeper than max_depth (but parseable) is refused naming where."""
        with pytest.raises(JSONInputError) as err:
            loads('{"x": [[[[1]]]]}', max_depth=3)
        assert err.value.where.startswith("x[0]")
        assert loads('{"x": [[1]]}', max_depth=3) == {"x": [[1]]}

    def test_depth_limit_off(self) -> None:
        """max_depth=None keeps only the parser's guard."""
        assert loads("[" * 100 + "]" * 100, max_depth=None) is not None

    @pytest.mark.parametrize(
        ("data", "where"),
        [
            (b'{"entries": [{"id": "a", "text": "x\\ud800"}]}', "entries[0].text"),
            (b'{"k\\udfff": 1}', "<key>"),
            ('["ok", "\\uDC00"]', "[1]"),
            ('["raw \ud800 char"]', "[0]"),
        ],
    )
    def test_lone_surrogate_refused_naming_field(self, data: str | bytes, where: str) -> None:
        """Lone surrogates (escaped in bytes or str, uppercase hex, keys, raw in a str) are refused."""
        with pytest.raises(JSONInputError, match="lone surrogate") as err:
            loads(data)
        assert where in err.value.where

    def test_unicode_check_can_be_off(self) -> None:
        """unicode=False lets the caller repair text itself."""
        assert loads(b'["\\ud800"]', unicode=False) == ["\ud800"]

    @pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
    def test_nan_refused_unless_allowed(self, token: str) -> None:
        """The non-JSON constants are refused by default."""
        with pytest.raises(JSONInputError, match=token):
            loads(f"[{token}]")
        assert len(loads(f"[{token}]", allow_nan=True)) == 1

    @pytest.mark.parametrize(("data", "words"), [(b"{nope", "invalid JSON"), (b'"\xff"', "not valid UTF-8")])
    def test_malformed_is_value_error(self, data: bytes, words: str) -> None:
        """Malformed JSON and invalid UTF-8 are JSONInputError (a ValueError)."""
        with pytest.raises(ValueError, match=words):
            loads(data)


def test_check_text() -> None:
    """check_text passes valid text through and refuses a lone surrogate with its position."""
    assert check_text("héllo") == "héllo"
    with pytest.raises(JSONInputError, match="character 2"):
        check_text("ab\ud800", "f")


def test_public_api() -> None:
    """The module exports exactly its documented names."""
    assert set(mod.__all__) == {"DEFAULT_MAX_DEPTH", "MAX_INT_DIGITS", "JSONInputError", "check_text", "loads"}


@pytest.mark.parametrize("digits", [65, 4301, 100_000])
def test_an_integer_too_long_is_invalid_input(digits: int) -> None:
    """An integer past the bound (Python itself refuses past 4,300 digits, with a ValueError that reached the
    service as a 500) is the parser's own error, anywhere in the document."""
    for doc in (b"9" * digits, b'{"a": [1, {"b": -' + b"9" * digits + b"}]}"):
        with pytest.raises(mod.JSONInputError, match=f"a number of {digits} digits"):
            mod.loads(doc)
    assert mod.loads(b"-" + b"9" * 64) == -int("9" * 64)


# Any text, lone surrogates and control characters included.
_TEXT = st.text(alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF), max_size=20)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=30,
)


class TestFuzz:
    @given(doc=_JSON)
    def test_any_document_round_trips_or_is_refused_cleanly(self, doc: object) -> None:
        """Whatever the document, loads returns it or raises JSONInputError: never another exception."""
        text = json.dumps(doc)
        if any(0xD800 <= ord(c) <= 0xDFFF for c in json.dumps(doc, ensure_ascii=False)):
            with pytest.raises(JSONInputError, match="lone surrogate"):
                loads(text)
            return
        out = loads(text)
        assert out == json.loads(text)
        json.dumps(out, ensure_ascii=False).encode("utf-8")  # what passes is valid Unicode

    @given(data=st.binary(max_size=200))
    def test_any_bytes_are_json_or_a_value_error(self, data: bytes) -> None:
        """Arbitrary bytes parse or raise JSONInputError."""
        with contextlib.suppress(JSONInputError):
            loads(data)
