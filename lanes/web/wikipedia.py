"""Keyless web lane over Wikipedia's search API (MediaWiki Action API ``list=search``).

``GET {url}/w/api.php?action=query&list=search&srsearch=…&format=json&formatversion=2``. Wikipedia is a
keyless, high-credibility source: its domain carries ``keyless = true`` in ``fabric/config/authority.toml``, which is
where the fusion keyless boost comes from (the lane only reports the domain). The MediaWiki API reports errors
in the body (``{"error": {"code", "info"}}``, often with HTTP 200): ``maxlag``/``ratelimited`` become a rate
limit rejection, anything else a bad response. The identifying User-Agent the Wikimedia API policy asks for is
set on the shared session.

Options (``lanes.toml``)::

    [lanes.wikipedia]
    kind = "web"
    backend = "wikipedia"
    options = { url = "https://en.wikipedia.org", timeout_s = 3.0 }

``url`` (default ``https://en.wikipedia.org``), ``timeout_s`` (default 5), ``max_bytes``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fabric.core.errors import LaneBadResponse, LaneRejected
from fabric.core.models import Hit, LaneRequest, SourceKind
from lanes.base import Backend
from lanes.web._common import HttpLane, clean_html, parse_time, site_allowed

__all__ = ["BACKEND", "WikipediaWebLane"]

_RATE_CODES = frozenset({"maxlag", "ratelimited", "toomanyvalues"})


class WikipediaWebLane(HttpLane):
    """Wikipedia full-text search → web hits (keyless, high credibility)."""

    provider = "wikipedia"
    default_url = "https://en.wikipedia.org"

    async def search(self, request: LaneRequest) -> list[Hit]:
        """Run ``list=search`` and convert the matches."""
        if not site_allowed(self.domain, request.constraints):
            return []
        params = {
            "action": "query",
            "list": "search",
            "srsearch": request.query,
            "srlimit": str(min(request.top_k, 50)),
            "srprop": "snippet|timestamp|wordcount",
            "format": "json",
            "formatversion": "2",
            "utf8": "1",
        }
        resp = await self.get("/w/api.php", params)
        return self._convert(resp.json(lane=self.name, provider=self.provider))

    def _convert(self, payload: Any) -> list[Hit]:
        if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
            err = payload["error"]
            msg = f"MediaWiki error {err.get('code')}: {err.get('info')}"
            if err.get("code") in _RATE_CODES:
                raise LaneRejected(msg, lane=self.name, provider=self.provider, suspend_s=None)
            raise LaneBadResponse(msg, lane=self.name, provider=self.provider)
        try:
            matches = payload["query"]["search"]
            if not isinstance(matches, list):
                raise TypeError("search is not a list")
        except (KeyError, TypeError) as exc:
            msg = f"unexpected MediaWiki answer: {exc!r}"
            raise LaneBadResponse(msg, lane=self.name, provider=self.provider) from None
        hits: list[Hit] = []
        for raw in matches:
            if not isinstance(raw, dict) or not isinstance(raw.get("title"), str):
                continue
            title = raw["title"]
            # errors="replace": a title with a lone surrogate still links (the boundary repairs the title itself)
            url = f"{self.url}/wiki/{quote(title.replace(' ', '_'), safe='/:()_,', errors='replace')}"
            hits.append(
                Hit(
                    id=url,
                    rank=len(hits) + 1,
                    score=1.0 / (len(hits) + 1),
                    title=title,
                    text=clean_html(str(raw.get("snippet") or "")),
                    url=url,
                    domain=self.domain,
                    source_kind=SourceKind.WEB,
                    source_ref=f"wikipedia:{raw.get('pageid', '')}",
                    metadata={
                        "keyless": True,
                        "modified_at": parse_time(raw.get("timestamp")),
                        "wordcount": raw.get("wordcount"),
                    },
                )
            )
        return hits


BACKEND = Backend(name="wikipedia", lane=WikipediaWebLane)
"""Wikipedia's public API (keyless)."""
