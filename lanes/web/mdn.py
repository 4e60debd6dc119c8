"""Keyless web lane over MDN Web Docs' site search API (``GET /api/v1/search?q=…&locale=…``).

The answer is ``{"documents": [{"mdn_url", "title", "summary", "score", "highlight": {"body": [...]}}],
"metadata": {...}, "suggestions": [...]}``; validation failures come back as 400 with
``{"errors": {"q": [{"message", "code"}]}}``. MDN is a keyless, high-credibility source
(``developer.mozilla.org`` has ``keyless = true`` in ``config/authority.toml``).

Options (``lanes.toml``)::

    [lanes.mdn]
    kind = "web"
    backend = "mdn"
    options = { url = "https://developer.mozilla.org", locale = "en-US", timeout_s = 3.0 }

``url`` (default ``https://developer.mozilla.org``), ``locale`` (default ``en-US``), ``timeout_s`` (default 5),
``max_bytes``.
"""

from __future__ import annotations

from typing import Any

from fabric.errors import LaneBadResponse
from fabric.httpclient import DEFAULT_MAX_BYTES, fetch, raise_for_status
from fabric.models import Hit, LaneRequest, SourceKind
from lanes._options import LaneOptions
from lanes.base import BaseLane, LaneResources, LaneSpec
from lanes.web._common import clean_html, domain_of, remember, site_allowed

__all__ = ["MdnWebLane"]


class MdnWebLane(BaseLane):
    """MDN site search → web hits (keyless, high credibility)."""

    provider = "mdn"

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        super().__init__(spec, resources)
        opts = LaneOptions(spec)
        self.url = opts.text("url", "https://developer.mozilla.org").rstrip("/")
        self.locale = opts.text("locale", "en-US")
        self.timeout_s = opts.number("timeout_s", 5.0)
        self.max_bytes = opts.integer("max_bytes", DEFAULT_MAX_BYTES)
        self.domain = domain_of(self.url)

    async def search(self, request: LaneRequest) -> list[Hit]:
        """Query MDN and convert its documents."""
        if not site_allowed(self.domain, request.constraints):
            return []
        resp = await fetch(
            self.resources.http, "GET", f"{self.url}/api/v1/search",
            params={"q": request.query, "locale": self.locale, "size": str(min(request.top_k, 100))},
            timeout_s=self.timeout_s, lane=self.name, provider=self.provider, max_bytes=self.max_bytes,
            check_status=False,
        )
        payload = resp.json(lane=self.name, provider=self.provider) if resp.body else None
        if resp.status == 400 and isinstance(payload, dict) and isinstance(payload.get("errors"), dict):
            detail = "; ".join(f"{k}: {e.get('message')}" for k, errs in payload["errors"].items() for e in errs)
            raise LaneBadResponse(f"MDN rejected the query: {detail}", lane=self.name, provider=self.provider)
        raise_for_status(resp, lane=self.name, provider=self.provider)
        hits = self._convert(payload)
        remember(self.resources, request.query, self.provider, hits)
        return hits

    def _convert(self, payload: Any) -> list[Hit]:
        docs = payload.get("documents") if isinstance(payload, dict) else None
        if not isinstance(docs, list):
            raise LaneBadResponse("MDN answer has no 'documents' list", lane=self.name, provider=self.provider)
        hits: list[Hit] = []
        for raw in docs:
            if not isinstance(raw, dict) or not isinstance(raw.get("mdn_url"), str):
                continue
            url = self.url + raw["mdn_url"]
            body = (raw.get("highlight") or {}).get("body") or []
            text = clean_html(str(raw.get("summary") or " … ".join(map(str, body))))
            score = raw.get("score")
            hits.append(
                Hit(
                    id=url, rank=len(hits) + 1,
                    score=float(score) if isinstance(score, int | float) else 1.0 / (len(hits) + 1),
                    title=clean_html(str(raw.get("title") or "")), text=text, url=url, domain=self.domain,
                    source_kind=SourceKind.WEB, source_ref=f"mdn:{raw.get('slug', raw['mdn_url'])}",
                    metadata={"keyless": True, "locale": raw.get("locale"), "popularity": raw.get("popularity")},
                )
            )
        return hits
