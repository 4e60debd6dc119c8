"""WebCache: TTL, normalised keys, bounded size."""

from __future__ import annotations

import pytest

import fabric.net.webcache as mod
from fabric.core.models import Hit
from fabric.net.webcache import WebCache

HITS = [Hit(id="a", rank=1, score=1.0)]


class TestWebCache:
    def test_normalised_key(self) -> None:
        """Case, width and whitespace variants share one entry."""
        cache = WebCache()
        cache.remember("Ｒｒｆ  Fusion", "p", HITS)
        assert cache.lookup("rrf fusion")[0].hits == tuple(HITS)

    def test_expired_entries_dropped(self) -> None:
        """Entries older than ttl_s are not returned and are evicted."""
        now = [0.0]
        cache = WebCache(ttl_s=10, clock=lambda: now[0])
        cache.remember("q", "p", HITS)
        now[0] = 11.0
        assert (cache.lookup("q"), len(cache)) == ([], 0)

    def test_bounded(self) -> None:
        """The oldest query is evicted past max_entries."""
        cache = WebCache(max_entries=2)
        for q in ("a", "b", "c"):
            cache.remember(q, "p", HITS)
        assert (cache.lookup("a"), len(cache)) == ([], 2)

    def test_empty_answers_not_cached(self) -> None:
        """An empty answer does not overwrite the cache."""
        cache = WebCache()
        cache.remember("q", "p", [])
        assert len(cache) == 0

    def test_bad_parameters(self) -> None:
        """Non-positive TTL is a programmer error."""
        with pytest.raises(ValueError, match="ttl_s"):
            WebCache(ttl_s=0)


def test_public_api() -> None:
    """The module exports the cache, its entry type and the cache lane's provider name."""
    assert set(mod.__all__) == {"WEB_CACHE_PROVIDER", "CachedHits", "WebCache"}
