"""Tests for signed pagination cursors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric.core.errors import QueryError
from fusion.cursor import decode_cursor, encode_cursor, fingerprint

SECRET = b"s3cret"
FP = fingerprint({"query": "q", "mode": "technical", "top_k": 10})


class TestCursor:
    def test_roundtrip(self) -> None:
        """A cursor decodes to the offset it was made for."""
        assert decode_cursor(encode_cursor(30, FP, SECRET), FP, SECRET) == 30

    def test_opaque(self) -> None:
        """The token does not show the offset in clear text."""
        assert "30" not in encode_cursor(30, FP, SECRET)[2:]

    def test_tampered_rejected(self) -> None:
        """Changing any character of the token is detected."""
        token = encode_cursor(10, FP, SECRET)
        bad = token[:-1] + ("A" if token[-1] != "A" else "B")
        with pytest.raises(QueryError) as info:
            decode_cursor(bad, FP, SECRET)
        assert info.value.field == "cursor"

    def test_foreign_query_rejected(self) -> None:
        """A cursor issued for another query is refused."""
        other = fingerprint({"query": "other", "mode": "technical", "top_k": 10})
        with pytest.raises(QueryError, match="different query"):
            decode_cursor(encode_cursor(10, other, SECRET), FP, SECRET)

    def test_foreign_secret_rejected(self) -> None:
        """A cursor signed with another secret is refused."""
        with pytest.raises(QueryError):
            decode_cursor(encode_cursor(10, FP, b"other"), FP, SECRET)

    @pytest.mark.parametrize("token", ["", "garbage", "c1!!!", "c1AAAA"])
    def test_malformed_rejected(self, token: str) -> None:
        """Malformed tokens give a cursor QueryError, not a crash."""
        with pytest.raises(QueryError):
            decode_cursor(token, FP, SECRET)

    def test_fingerprint_stable_under_key_order(self) -> None:
        """The fingerprint does not depend on key order."""
        assert fingerprint({"a": 1, "b": 2}) == fingerprint({"b": 2, "a": 1})

    def test_negative_offset_is_programmer_error(self) -> None:
        """Encoding a negative offset raises ValueError."""
        with pytest.raises(ValueError, match="offset"):
            encode_cursor(-1, FP, SECRET)


class TestCursorProperties:
    @given(offset=st.integers(min_value=0, max_value=1_000_000), query=st.text(max_size=50))
    def test_roundtrip_any_offset(self, offset: int, query: str) -> None:
        """Every offset survives a roundtrip for any query fingerprint."""
        fp = fingerprint({"query": query})
        assert decode_cursor(encode_cursor(offset, fp, SECRET), fp, SECRET) == offset

    @given(offset=st.integers(min_value=0, max_value=10_000), position=st.integers(min_value=2), data=st.data())
    def test_any_single_character_change_is_rejected(self, offset: int, position: int, data: st.DataObject) -> None:
        """Changing any one character after the version prefix is rejected."""
        token = encode_cursor(offset, FP, SECRET)
        i = position % len(token)
        i = max(i, 2)
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        ch = data.draw(st.sampled_from([c for c in alphabet if c != token[i]]))
        forged = token[:i] + ch + token[i + 1 :]
        with pytest.raises(QueryError):
            decode_cursor(forged, FP, SECRET)


class TestCursorFuzz:
    @settings(max_examples=300)
    @given(token=st.text(max_size=120) | st.from_regex(r"\Av1\.[A-Za-z0-9_\-]{0,90}={0,3}\Z"))
    def test_any_token_is_an_offset_or_a_query_error(self, token: str) -> None:
        """Random text (lone surrogates included) or v1-shaped garbage: a QueryError naming the cursor, nothing
        else (never a ValueError, binascii.Error or UnicodeError)."""
        offset: int | QueryError
        try:
            offset = decode_cursor(token, FP, SECRET)
        except QueryError as exc:
            offset = exc
        assert offset.field == "cursor" if isinstance(offset, QueryError) else offset >= 0
