"""Web lane over the Brave Search API (``GET /res/v1/web/search``), keyed by a subscription token.

``GET {url}/res/v1/web/search?q=…&count=…`` with the ``X-Subscription-Token`` header; the answer's
``web.results`` list holds ``{"title", "url", "description", "page_age", "meta_url": {"hostname"}}``. Titles and
descriptions carry ``<strong>`` highlighting, which is stripped. Brave reports failures as
``{"type": "ErrorResponse", "error": {"code", "detail", "status"}}``: their ``code: detail`` is kept in the lane
error; statuses map as for every HTTP lane (401/403 forbidden, 429 a rate limit honouring ``Retry-After``, 5xx
unavailable). A single ``site:`` constraint is passed in the query, as Brave understands it; every hit is also
checked against the sites and date bounds.

Options (``lanes.toml``)::

    [lanes.brave]
    kind = "web"
    backend = "brave"
    fallback = "web_cache"
    options = { url = "https://api.search.brave.com", timeout_s = 3.0, country = "us", search_lang = "en" }

``url`` (default ``https://api.search.brave.com``; list it so the HTTP allow-list admits the host), ``api_key``
(required; only from ``FABRIC_BRAVE_API_KEY``), ``timeout_s`` (default 5), ``max_bytes``, ``country``,
``search_lang``, ``safesearch`` (Brave parameters, omitted when empty).
"""

from __future__ import annotations

from typing import Any

from fabric.core.errors import LaneBadResponse
from fabric.core.models import Hit, LaneRequest, SourceKind
from fabric.net.httpclient import raise_for_status
from lanes.base import Backend, LaneResources, LaneSpec
from lanes.web._common import HttpLane, clean_html, domain_of, in_date_bounds, normalise_url, parse_time, site_allowed

__all__ = ["BACKEND", "BraveWebLane"]

_PARAMS = ("country", "search_lang", "safesearch")


class BraveWebLane(HttpLane):
    """Brave Search web results → web hits."""

    provider = "brave"
    default_url = "https://api.search.brave.com"

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        super().__init__(spec, resources)
        self.headers = {"X-Subscription-Token": self.opts.text("api_key"), "Accept": "application/json"}
        self.extra = {k: self.opts.text(k, "") for k in _PARAMS}

    async def search(self, request: LaneRequest) -> list[Hit]:
        """Query Brave and convert its web results."""
        query = request.query
        if len(request.constraints.sites) == 1:
            query = f"{query} site:{request.constraints.sites[0]}"
        params = {"q": query, "count": str(min(request.top_k, 20)), **{k: v for k, v in self.extra.items() if v}}
        resp = await self.get("/res/v1/web/search", params, headers=self.headers, check_status=False)
        payload = resp.json(lane=self.name, provider=self.provider) if resp.body.startswith(b"{") else None
        error = payload.get("error") if isinstance(payload, dict) else None
        detail = f"{error.get('code')}: {error.get('detail')}" if isinstance(error, dict) else ""
        raise_for_status(resp, lane=self.name, provider=self.provider, detail=detail)
        if not isinstance(payload, dict):
            raise LaneBadResponse("Brave answer is not a JSON object", lane=self.name, provider=self.provider)
        web = payload.get("web") or {}  # absent when nothing matched
        results = web.get("results", []) if isinstance(web, dict) else None
        if not isinstance(results, list):
            raise LaneBadResponse("Brave answer has no 'web.results' list", lane=self.name, provider=self.provider)
        return self._convert(results, request)

    def _convert(self, results: list[Any], request: LaneRequest) -> list[Hit]:
        hits: list[Hit] = []
        seen: set[str] = set()
        for raw in results:
            if not isinstance(raw, dict) or not str(raw.get("url", "")).startswith("http"):
                continue
            hit_id, domain = normalise_url(raw["url"]), domain_of(raw["url"])
            published = parse_time(raw.get("page_age"))
            if hit_id in seen or not site_allowed(domain, request.constraints):
                continue
            seen.add(hit_id)
            if not in_date_bounds(published, request.constraints):
                continue
            hits.append(
                Hit(
                    id=hit_id, rank=len(hits) + 1, score=1.0 / (len(hits) + 1),
                    title=clean_html(str(raw.get("title") or "")), text=clean_html(str(raw.get("description") or "")),
                    url=raw["url"], domain=domain, published_at=published, source_kind=SourceKind.WEB,
                    source_ref="brave:web", metadata={"age": raw.get("age")},
                )
            )  # fmt: skip
            if len(hits) >= request.top_k:
                break
        return hits


BACKEND = Backend(
    name="brave", lane=BraveWebLane, env={"FABRIC_BRAVE_API_KEY": "api_key"}, secrets=frozenset({"api_key"})
)
"""Brave's public search API (a subscription token from the environment)."""
