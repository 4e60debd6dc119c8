"""The web lane's fallback: answers from the shared web response cache (seed 003, "Cached results").

Reads the :class:`fabric.webcache.WebCache` the app injects as ``resources.extras["web_cache"]``, which every
successful web lane call (SearXNG, Wikipedia, MDN) fills. It contacts nothing, so it answers within any budget.
Cached answers of several providers are interleaved round-robin (freshest provider first), deduplicated by id
and re-ranked; each hit's metadata records ``cached_from`` and ``cache_age_s``. A miss is an empty answer.

Several web lanes (SearXNG, Wikipedia, MDN) share this one fallback; when more than one fails in the same query,
only the first call for a ``trace_id`` is served, so the cached items are fused once instead of once per failed
lane (which would multiply their RRF contribution).

Options (``lanes.toml``): none. The executor builds it for ``fallback = "web_cache"``::

    [lanes.web]
    backend = "searxng"
    fallback = "web_cache"
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from itertools import zip_longest

from fabric.models import Hit, LaneRequest
from fabric.webcache import WEB_CACHE_KEY, WebCache
from lanes.base import BaseLane, LaneResources, LaneSpec
from lanes.web._common import site_allowed

__all__ = ["CachedWebLane"]


class CachedWebLane(BaseLane):
    """Serves cached web answers for the normalised query."""

    provider = "web_cache"

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        super().__init__(spec, resources)
        self._served: OrderedDict[str, None] = OrderedDict()

    def _first_for(self, trace_id: str) -> bool:
        """True the first time a trace id asks (always true without one); remembers the last 4096."""
        if not trace_id:
            return True
        if trace_id in self._served:
            return False
        self._served[trace_id] = None
        if len(self._served) > 4096:
            self._served.popitem(last=False)
        return True

    async def search(self, request: LaneRequest) -> list[Hit]:
        """Interleave fresh cached answers for ``request.query`` (once per query)."""
        cache = self.resources.extras.get(WEB_CACHE_KEY)
        if not isinstance(cache, WebCache) or not self._first_for(request.trace_id):
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
