"""The web lanes' response cache: the fusion policy's "cached results" fallback of the web lane.

A TTL cache keyed by the normalised query (NFKC, case-folded, whitespace collapsed). The executor writes the hits
of every successful web-kind lane call (``remember``), per provider; the ``web_cache`` backend
(:class:`lanes.web.web_cache.CachedWebLane`, provider :data:`WEB_CACHE_PROVIDER`) reads them when the live lane fails
or runs out of budget. The app owns one instance and injects it as ``LaneResources.web_cache``; with no instance,
nothing is cached.

Bounded: at most ``max_entries`` queries (least recently written evicted first). Time comes from an injectable
monotonic clock, so tests never sleep.
"""

from __future__ import annotations

import time
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fabric.core.models import Hit

__all__ = ["WEB_CACHE_PROVIDER", "CachedHits", "WebCache"]

WEB_CACHE_PROVIDER = "web_cache"
"""Backend and provider name of the lane that serves this cache (its answers are never written back)."""


@dataclass(frozen=True, slots=True)
class CachedHits:
    """One provider's hits for one query, and how old they are."""

    provider: str
    hits: tuple[Hit, ...]
    age_s: float


class WebCache:
    """In-memory TTL cache of web lane answers keyed by normalised query, then provider."""

    def __init__(self, *, ttl_s: float = 900.0, max_entries: int = 2048, clock: Callable[[], float] = time.monotonic):
        if ttl_s <= 0 or max_entries < 1:
            raise ValueError("ttl_s must be > 0 and max_entries >= 1")
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._clock = clock
        self._data: OrderedDict[str, dict[str, tuple[float, tuple[Hit, ...]]]] = OrderedDict()

    @staticmethod
    def normalise(query: str) -> str:
        """The cache key of ``query``: NFKC, case-folded, whitespace collapsed."""
        return " ".join(unicodedata.normalize("NFKC", query).casefold().split())

    def remember(self, query: str, provider: str, hits: Sequence[Hit]) -> None:
        """Store ``provider``'s hits for ``query`` (empty answers are not cached)."""
        if not hits:
            return
        key = self.normalise(query)
        entry = self._data.pop(key, {})
        entry[provider] = (self._clock(), tuple(hits))
        self._data[key] = entry
        while len(self._data) > self.max_entries:
            self._data.popitem(last=False)

    def lookup(self, query: str) -> list[CachedHits]:
        """Fresh cached answers for ``query``, newest first; expired ones are dropped."""
        key = self.normalise(query)
        entry = self._data.get(key)
        if not entry:
            return []
        now = self._clock()
        fresh = {p: (t, h) for p, (t, h) in entry.items() if now - t <= self.ttl_s}
        if fresh:
            self._data[key] = fresh
        else:
            del self._data[key]
        return sorted((CachedHits(p, h, now - t) for p, (t, h) in fresh.items()), key=lambda c: c.age_s)

    def __len__(self) -> int:
        return len(self._data)
