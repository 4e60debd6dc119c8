"""CachedWebLane: serves what web lanes cached, interleaved, within any budget."""

from __future__ import annotations

from fabric.core.models import BoundConstraints, Hit, LaneKind, LaneRequest
from fabric.net.webcache import WebCache
from lanes.base import LaneResources, LaneSpec
from lanes.web.web_cache import CachedWebLane


def _hit(i: str, domain: str = "a.org") -> Hit:
    return Hit(id=i, rank=1, score=1.0, url=f"https://{domain}/{i}", domain=domain)


def _lane(cache: WebCache | None) -> CachedWebLane:
    spec = LaneSpec(name="web_cache", kind=LaneKind.WEB, backend="web_cache")
    return CachedWebLane(spec, LaneResources(web_cache=cache))


class TestCachedWebLane:
    async def test_interleaves_providers_and_reranks(self) -> None:
        """Answers of two providers are interleaved, deduplicated and re-ranked from 1."""
        now = [0.0]
        cache = WebCache(clock=lambda: now[0])
        cache.remember("q", "searxng", [_hit("a"), _hit("b")])
        now[0] = 1.0
        cache.remember("q", "wikipedia", [_hit("w"), _hit("a")])
        hits = await _lane(cache).search(LaneRequest(query=" Q "))
        assert [(h.id, h.rank, h.metadata["cached_from"]) for h in hits] == [
            ("w", 1, "wikipedia"),
            ("a", 2, "searxng"),
            ("b", 3, "searxng"),
        ]

    async def test_miss_is_empty(self) -> None:
        """A query never answered gives no hits."""
        assert await _lane(WebCache()).search(LaneRequest(query="q")) == []

    async def test_no_cache_injected_is_empty(self) -> None:
        """Without a shared cache the lane answers empty rather than failing."""
        assert await _lane(None).search(LaneRequest(query="q")) == []

    async def test_site_constraint_applies(self) -> None:
        """Cached hits outside a site: constraint are dropped."""
        cache = WebCache()
        cache.remember("q", "searxng", [_hit("a"), _hit("b", "b.org")])
        hits = await _lane(cache).search(LaneRequest(query="q", constraints=BoundConstraints(sites=("b.org",))))
        assert [h.id for h in hits] == ["b"]
