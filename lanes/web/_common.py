"""What the HTTP web lanes share: one base class (options, the shared session, one GET), URL normalisation,
domains, dates and snippets.

A web lane is request → parse → map errors: the executor writes the web response cache after each successful
web-kind call (:mod:`fabric.query.executor`), retries, budgets and penalties are its business too.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from fabric.core.models import BoundConstraints
from fabric.net.httpclient import DEFAULT_MAX_BYTES, HttpResponse, fetch
from lanes._options import LaneOptions
from lanes.base import BaseLane, LaneResources, LaneSpec

__all__ = [
    "HttpLane",
    "clean_html",
    "domain_of",
    "in_date_bounds",
    "normalise_url",
    "parse_time",
    "site_allowed",
]

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


class HttpLane(BaseLane):
    """Base of the lanes that GET one JSON API through the app's shared session.

    Reads the options every such lane has: ``url`` (:attr:`default_url` when the lane has one, else required),
    ``timeout_s`` (per request, default 5) and ``max_bytes`` (response cap); :attr:`opts` reads the rest.
    """

    default_url: str | None = None
    """The public service's URL, or None when ``url`` is required (a self-hosted service)."""

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        super().__init__(spec, resources)
        self.opts = LaneOptions(spec)
        self.url = self.opts.text("url", self.default_url).rstrip("/")
        self.timeout_s = self.opts.number("timeout_s", 5.0)
        self.max_bytes = self.opts.integer("max_bytes", DEFAULT_MAX_BYTES)
        self.domain = domain_of(self.url)

    async def get(
        self,
        path: str,
        params: Mapping[str, str],
        *,
        headers: Mapping[str, str] | None = None,
        check_status: bool = True,
    ) -> HttpResponse:
        """``GET url + path`` within the lane's timeout and size cap (HTTP failures are lane errors)."""
        return await fetch(
            self.resources.http,
            "GET",
            self.url + path,
            params=dict(params),
            headers=dict(headers or {}),
            timeout_s=self.timeout_s,
            lane=self.name,
            provider=self.provider,
            max_bytes=self.max_bytes,
            check_status=check_status,
        )
