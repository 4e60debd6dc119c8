"""Helpers shared by the web lanes: URL normalisation, domains, dates, snippets, and the web cache write."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from fabric.models import BoundConstraints, Hit
from fabric.webcache import WEB_CACHE_KEY, WebCache
from lanes.base import LaneResources

__all__ = ["clean_html", "domain_of", "in_date_bounds", "normalise_url", "parse_time", "remember", "site_allowed"]

_TAG = re.compile(r"<[^>]+>")
_TRACKING = ("utm_", "fbclid", "gclid")


def normalise_url(url: str) -> str:
    """Web hit id: lowercase scheme/host without www., no fragment, tracking params or trailing slash."""
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower().removeprefix("www.")
    default_port = {"http": 80, "https": 443}.get(parts.scheme)
    if parts.port and parts.port != default_port:
        host = f"{host}:{parts.port}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if not k.lower().startswith(_TRACKING)])
    path = parts.path.rstrip("/") or "/"
    return urlunsplit((parts.scheme.lower(), host, path, query, ""))


def domain_of(url: str) -> str:
    """Host name of ``url`` without ``www.``."""
    host = (urlsplit(url).hostname or "").lower()
    return host[4:] if host.startswith("www.") else host


def parse_time(value: object) -> datetime | None:
    """An ISO-8601 timestamp (``Z`` allowed, naive read as UTC) → aware UTC datetime; None when absent/bad."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def clean_html(text: str) -> str:
    """Strip tags (search-match highlighting) and unescape entities."""
    return " ".join(html.unescape(_TAG.sub("", text)).split())


def site_allowed(domain: str, constraints: BoundConstraints) -> bool:
    """Whether ``domain`` satisfies the hard ``site:`` filter (a site matches itself and its subdomains)."""
    if not constraints.sites:
        return True
    sites = (x.lower().removeprefix("www.") for x in constraints.sites)
    return any(domain == s or domain.endswith("." + s) for s in sites)


def in_date_bounds(published: datetime | None, constraints: BoundConstraints) -> bool:
    """Whether ``published`` is inside the date bounds (undated items are kept)."""
    if published is None:
        return True
    if constraints.date_from and published < constraints.date_from:
        return False
    return not (constraints.date_to and published > constraints.date_to)


def remember(resources: LaneResources, query: str, provider: str, hits: Sequence[Hit]) -> None:
    """Write a successful answer to the shared web cache, when the app injected one."""
    cache = resources.extras.get(WEB_CACHE_KEY)
    if isinstance(cache, WebCache):
        cache.remember(query, provider, hits)
