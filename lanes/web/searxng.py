"""Web lane over a self-hosted SearXNG instance's JSON search API (``GET /search?format=json``).

SearXNG must list ``json`` under ``search.formats`` in its ``settings.yml`` (``deploy/searxng/settings.yml``);
otherwise it answers 403, which maps to a ``forbidden`` rejection. Each result becomes a :class:`Hit` with the
normalised URL as id, the domain, title, ``content`` as snippet and ``publishedDate`` when the engine gave one.
The executor writes successful answers to the web response cache (the ``web_cache`` fallback reads it).

Options (``lanes.toml``)::

    [lanes.web]
    kind = "web"
    backend = "searxng"
    fallback = "web_cache"
    options = { url = "http://searxng:8080", timeout_s = 3.0, categories = "general", language = "en" }

``url`` (required; ``FABRIC_SEARXNG_URL`` overrides it), ``timeout_s`` (per request, default 5), ``categories``,
``engines``, ``language`` (SearXNG parameters, omitted when empty), ``max_bytes`` (response cap).
"""

from __future__ import annotations

from typing import Any

from fabric.core.errors import LaneBadResponse
from fabric.core.models import Hit, LaneRequest, SourceKind
from lanes.base import Backend, LaneResources, LaneSpec
from lanes.web._common import HttpLane, clean_html, domain_of, in_date_bounds, normalise_url, parse_time, site_allowed

__all__ = ["BACKEND", "SearxngWebLane"]


class SearxngWebLane(HttpLane):
    """SearXNG JSON API → web hits."""

    provider = "searxng"

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        super().__init__(spec, resources)
        self.extra = {k: self.opts.text(k, "") for k in ("categories", "engines", "language")}

    def _params(self, request: LaneRequest) -> dict[str, str]:
        query = request.query
        if len(request.constraints.sites) == 1:
            query = f"{query} site:{request.constraints.sites[0]}"
        params = {"q": query, "format": "json", "pageno": "1"}
        params.update({k: v for k, v in self.extra.items() if v})
        return params

    async def search(self, request: LaneRequest) -> list[Hit]:
        """Query SearXNG and convert its results."""
        resp = await self.get("/search", self._params(request))
        payload = resp.json(lane=self.name, provider=self.provider)
        results = payload.get("results") if isinstance(payload, dict) else None
        if not isinstance(results, list):
            raise LaneBadResponse("SearXNG answer has no 'results' list", lane=self.name, provider=self.provider)
        return self._convert(results, request)

    def _convert(self, results: list[Any], request: LaneRequest) -> list[Hit]:
        hits: list[Hit] = []
        seen: set[str] = set()
        for raw in results:
            if not isinstance(raw, dict) or not isinstance(raw.get("url"), str) or not raw["url"].startswith("http"):
                continue
            hit_id = normalise_url(raw["url"])
            domain = domain_of(raw["url"])
            published = parse_time(raw.get("publishedDate"))
            if hit_id in seen:
                continue
            seen.add(hit_id)
            if not site_allowed(domain, request.constraints) or not in_date_bounds(published, request.constraints):
                continue
            score = raw.get("score")
            hits.append(
                Hit(
                    id=hit_id,
                    rank=len(hits) + 1,
                    score=float(score) if isinstance(score, int | float) else 1.0 / (len(hits) + 1),
                    title=clean_html(str(raw.get("title") or "")),
                    text=clean_html(str(raw.get("content") or "")),
                    url=raw["url"],
                    domain=domain,
                    published_at=published,
                    source_kind=SourceKind.WEB,
                    source_ref=f"searxng:{','.join(map(str, raw.get('engines') or [raw.get('engine', '')]))}",
                    metadata={"engines": list(raw.get("engines") or [])},
                )
            )
            if len(hits) >= request.top_k:
                break
        return hits


BACKEND = Backend(name="searxng", lane=SearxngWebLane, env={"FABRIC_SEARXNG_URL": "url"}, self_hosted=True)
"""A self-hosted SearXNG instance (``url`` required)."""
