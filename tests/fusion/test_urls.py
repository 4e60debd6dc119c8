"""Tests for fusion.urls: URL normalisation and tokens."""

from __future__ import annotations

import pytest

from fusion import urls
from fusion.urls import normalise_url, url_tokens


class TestNormaliseUrl:
    def test_public_api(self) -> None:
        """The module exports the normaliser, the tokenizer and the tracking list."""
        assert sorted(urls.__all__) == ["TRACKING_PARAMS", "normalise_url", "url_tokens"]

    @pytest.mark.parametrize(
        "url",
        [
            "https://www.example.com/a/b/",
            "http://example.com/a/b",
            "https://EXAMPLE.com/a/b#section",
            "https://example.com:443/a/b?utm_source=x&gclid=1&fbclid=2",
        ],
    )
    def test_equivalent_forms(self, url: str) -> None:
        """Scheme, www., case of host, port, trailing slash, fragment and tracking params are dropped."""
        assert normalise_url(url) == "example.com/a/b"

    def test_query_sorted(self) -> None:
        """Remaining query parameters are sorted."""
        assert normalise_url("https://x.org/p?b=2&a=1") == normalise_url("https://x.org/p?a=1&b=2")

    def test_tokens(self) -> None:
        """Tokens are the host, positioned path segments and query pairs."""
        assert url_tokens("x.org/a/b?c=1") == {"h:x.org", "0:a", "1:b", "q:c=1"}
