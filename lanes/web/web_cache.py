"""The web lane's fallback: answers from the shared web response cache (the fusion policy, "Cached results").

Reads the :class:`fabric.net.webcache.WebCache` the app injects as ``resources.web_cache``, which the executor fills
after every successful web-kind lane call (SearXNG, Wikipedia, MDN). It contacts nothing, so it answers within
any budget.
Cached answers of several providers are interleaved round-robin (freshest provider first), deduplicated by id
and re-ranked; each hit's metadata records ``cached_from`` and ``cache_age_s``. A miss is an empty answer.

Several web lanes (SearXNG, Wikipedia, MDN) share this one fallback; when more than one fails in the same query,
the executor runs it once and shares its answer, so the cached items are fused once.

Options (``lanes.toml``): none. The executor builds it for ``fallback = "web_cache"``::

    [lanes.web]
    backend = "searxng"
    fallback = "web_cache"
"""

from __future__ import annotations

import dataclasses
from itertools import zip_longest

from fabric.core.models import Hit, LaneRequest
from fabric.net.webcache import WEB_CACHE_PROVIDER
from lanes.base import Backend, BaseLane
from lanes.web._common import site_allowed

__all__ = ["BACKEND", "CachedWebLane"]


class CachedWebLane(BaseLane):
    """Serves cached web answers for the normalised query."""

    provider = WEB_CACHE_PROVIDER

    async def search(self, request: LaneRequest) -> list[Hit]:
        """Interleave fresh cached answers for ``request.query``."""
        cache = self.resources.web_cache
        if cache is None:
            return []
        entries = cache.lookup(request.query)
        out: list[Hit] = []
        seen: set[str] = set()
        for row in zip_longest(*(e.hits for e in entries)):
            for entry, hit in zip(entries, row, strict=True):
                if hit is None or hit.id in seen or not site_allowed(hit.domain, request.constraints):
                    continue
                seen.add(hit.id)
                meta = {**hit.metadata, "cached_from": entry.provider, "cache_age_s": round(entry.age_s, 3)}
                out.append(dataclasses.replace(hit, rank=len(out) + 1, metadata=meta))
        return out[: request.top_k]


BACKEND = Backend(name=WEB_CACHE_PROVIDER, lane=CachedWebLane)
"""The web lanes' cached-results fallback (contacts nothing)."""
