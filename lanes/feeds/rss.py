"""News lane over configured RSS/Atom feeds: conditional GET through the shared session, parsed by feedparser.

Each feed is fetched by our HTTP client (allow-listed, size-capped, timed out) with ``If-None-Match`` /
``If-Modified-Since`` from the previous answer, and the *bytes* are handed to ``feedparser.parse`` (never a URL
or a path, so feedparser itself never touches the network or the disk). Parsed items are kept per feed and
refetched at most every ``refresh_s``; a ``304 Not Modified`` keeps them. When a refresh fails, the last good
items are served (the failure is logged); only when no feed has any items does the lane fail.

Items are matched to the query by term overlap on title + summary (score = share of query terms present) and
carry ``published_at``, so fusion's recency factor boosts fresh news.

Options (``lanes.toml``)::

    [lanes.news]
    kind = "news"
    backend = "rss"
    options = { feeds = ["https://example.org/feed.xml"], timeout_s = 2.0, refresh_s = 300 }

``feeds`` (required: URLs, or tables ``{ url = "...", name = "..." }``), ``timeout_s`` (per feed, default 3),
``refresh_s`` (default 300), ``max_bytes`` (default 2 MiB), ``private_network`` (allow private addresses).
"""

from __future__ import annotations

import asyncio
import calendar
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fabric.core.errors import ConfigError, LaneBadResponse, LaneError
from fabric.core.logs import get_logger
from fabric.core.models import Hit, LaneRequest, SourceKind
from fabric.net.httpclient import fetch
from lanes._options import LaneOptions
from lanes.base import Backend, BaseLane, LaneResources, LaneSpec
from lanes.web._common import clean_html, domain_of, in_date_bounds, normalise_url, site_allowed

__all__ = ["BACKEND", "RssNewsLane", "match_score"]

log = get_logger(__name__)

_WORD = re.compile(r"\w{2,}")
_STOP = frozenset(
    {
        "the",
        "and",
        "for",
        "with",
        "from",
        "that",
        "this",
        "what",
        "are",
        "was",
        "were",
        "how",
        "why",
        "who",
        "when",
        "which",
        "into",
        "about",
    }
)


def _terms(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.casefold()) if w not in _STOP}


def match_score(query: str, text: str) -> float:
    """Share of the query's terms present in ``text`` (0 when the query has no terms)."""
    q = _terms(query)
    return len(q & _terms(text)) / len(q) if q else 0.0


@dataclass(slots=True)
class _Feed:
    url: str
    name: str
    etag: str | None = None
    last_modified: str | None = None
    fetched_at: float | None = None
    items: list[dict[str, Any]] = field(default_factory=list)


def _when(entry: Mapping[str, Any]) -> datetime | None:
    for key in ("published_parsed", "updated_parsed"):
        value = entry.get(key)
        if value:
            return datetime.fromtimestamp(calendar.timegm(value), UTC)
    return None


def _parse(body: bytes, url: str) -> tuple[str, list[dict[str, Any]]]:
    import feedparser

    parsed = feedparser.parse(body, response_headers={"content-location": url})
    if parsed.get("bozo") and not parsed.entries and not parsed.feed:  # not a feed at all (HTML, JSON, garbage)
        raise ValueError(f"not an RSS or Atom feed: {parsed.get('bozo_exception')!r}"[:300])
    title = str(parsed.feed.get("title") or "")
    items = []
    for entry in parsed.entries:
        link = str(entry.get("link") or "")
        if not link.startswith(("http://", "https://")):
            continue
        items.append(
            {
                "title": clean_html(str(entry.get("title") or "")),
                "link": link,
                "summary": clean_html(str(entry.get("summary") or "")),
                "published_at": _when(entry),
            }
        )
    return title, items


class RssNewsLane(BaseLane):
    """Configured RSS/Atom feeds → news hits matched by term overlap."""

    provider = "rss"

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        super().__init__(spec, resources)
        opts = LaneOptions(spec)
        raw = opts.raw("feeds")
        if not isinstance(raw, list) or not raw:
            raise ConfigError("expected a non-empty list of feed URLs", key=f"lanes.{spec.name}.options.feeds")
        self.feeds = [
            _Feed(str(f["url"]), str(f.get("name", ""))) if isinstance(f, Mapping) else _Feed(str(f), "") for f in raw
        ]
        self.timeout_s = opts.number("timeout_s", 3.0)
        self.refresh_s = opts.number("refresh_s", 300.0)
        self.max_bytes = opts.integer("max_bytes", 2 * 1024 * 1024)
        self._lock = asyncio.Lock()

    async def _refresh(self, feed: _Feed) -> None:
        headers = {}
        if feed.etag:
            headers["If-None-Match"] = feed.etag
        if feed.last_modified:
            headers["If-Modified-Since"] = feed.last_modified
        resp = await fetch(
            self.resources.http,
            "GET",
            feed.url,
            headers=headers,
            timeout_s=self.timeout_s,
            lane=self.name,
            provider=self.provider,
            max_bytes=self.max_bytes,
        )
        feed.fetched_at = time.monotonic()
        if resp.status == 304:
            return
        try:
            title, items = await asyncio.to_thread(_parse, resp.body, feed.url)
        except ValueError as exc:
            raise LaneBadResponse(str(exc), lane=self.name, provider=self.provider) from None
        feed.name = feed.name or title
        feed.items = items
        feed.etag = resp.headers.get("ETag") or None
        feed.last_modified = resp.headers.get("Last-Modified") or None

    async def _refresh_due(self) -> None:
        now = time.monotonic()
        due = [f for f in self.feeds if f.fetched_at is None or now - f.fetched_at >= self.refresh_s]
        if not due:
            return
        results = await asyncio.gather(*(self._refresh(f) for f in due), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        for err in errors:
            if not isinstance(err, LaneError):
                raise err
            log.warning("feed_refresh_failed", lane=self.name, error=str(err))
        if errors and not any(f.items for f in self.feeds):
            raise errors[0]

    async def search(self, request: LaneRequest) -> list[Hit]:
        """Refresh due feeds, then rank their items by term overlap with the query."""
        async with self._lock:
            await self._refresh_due()
        scored: list[tuple[float, datetime, Hit]] = []
        for feed in self.feeds:
            for item in feed.items:
                score = match_score(request.query, f"{item['title']} {item['summary']}")
                domain = domain_of(item["link"])
                if score <= 0 or not site_allowed(domain, request.constraints):
                    continue
                if not in_date_bounds(item["published_at"], request.constraints):
                    continue
                hit = Hit(
                    id=normalise_url(item["link"]),
                    rank=0,
                    score=score,
                    title=item["title"],
                    text=item["summary"],
                    url=item["link"],
                    domain=domain,
                    published_at=item["published_at"],
                    source_kind=SourceKind.WEB,
                    source_ref=f"rss:{feed.url}",
                    metadata={"feed": feed.name},
                )
                scored.append((score, item["published_at"] or datetime.min.replace(tzinfo=UTC), hit))
        scored.sort(key=lambda t: (-t[0], -t[1].timestamp(), t[2].id))
        out: list[Hit] = []
        for _, _, hit in scored:
            if all(h.id != hit.id for h in out):
                out.append(Hit(**{**_fields(hit), "rank": len(out) + 1}))
            if len(out) >= request.top_k:
                break
        return out


def _fields(hit: Hit) -> dict[str, Any]:
    return {name: getattr(hit, name) for name in Hit.__dataclass_fields__}


BACKEND = Backend(name="rss", lane=RssNewsLane)
"""RSS/Atom feeds read with feedparser."""
