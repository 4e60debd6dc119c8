"""Tests for fusion.urls: URL normalisation and tokens."""

from __future__ import annotations

import pytest

from fusion import urls
from fusion.urls import normalise_url, url_key, url_tokens


class TestNormaliseUrl:
    def test_public_api(self) -> None:
        """The module exports the normaliser, the dedup key, the tokenizer and their constants."""
        assert sorted(urls.__all__) == [
            "LONG_URL_SEPARATORS",
            "TRACKING_PARAMS",
            "normalise_url",
            "url_key",
            "url_tokens",
        ]

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


class TestUrlKey:
    def test_http_url_is_normalised(self) -> None:
        """An http(s) URL's key is its normalised form."""
        assert url_key("https://www.example.com/a/b/?utm_source=x") == "example.com/a/b"

    def test_other_urls_have_no_key(self) -> None:
        """doc: references and empty URLs take no part in URL dedup."""
        assert (url_key("doc:paper-1"), url_key("")) == ("", "")

    def test_long_url_marked(self) -> None:
        """A URL with at least 8 separators ends with '#', which no normalised URL contains."""
        key = url_key("https://site.org/a/b/c/d/e/f/g/h?x=1")
        assert key == normalise_url("https://site.org/a/b/c/d/e/f/g/h?x=1") + "#"
        assert "#" not in url_key("https://site.org/a/b?x=1#frag")

    def test_empty_normalisation_still_compares(self) -> None:
        """http(s) URLs that normalise to nothing share the key '#', not the no-URL key."""
        assert url_key("http://www.") == url_key("https://#x") == "#"
