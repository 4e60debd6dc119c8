"""Keyless web lane over MDN Web Docs' site search API (``GET /api/v1/search?q=…&locale=…``).

The answer is ``{"documents": [{"mdn_url", "title", "summary", "score", "highlight": {"body": [...]}}],
"metadata": {...}, "suggestions": [...]}``; validation failures come back as 400 with
``{"errors": {"q": [{"message", "code"}]}}``. MDN is a keyless, high-credibility source
(``developer.mozilla.org`` has ``keyless = true`` in ``fabric/config/authority.toml``).

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

from fabric.core.errors import LaneBadResponse
from fabric.core.models import Hit, LaneRequest, SourceKind
from fabric.net.httpclient import raise_for_status
from lanes.base import Backend, LaneResources, LaneSpec
from lanes.web._common import HttpLane, clean_html, site_allowed

__all__ = ["BACKEND", "MdnWebLane"]


class MdnWebLane(HttpLane):
    """MDN site search → web hits (keyless, high credibility)."""

    provider = "mdn"
    default_url = "https://developer.mozilla.org"

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        super().__init__(spec, resources)
        self.locale = self.opts.text("locale", "en-US")

    async def search(self, request: LaneRequest) -> list[Hit]:
        """Query MDN and convert its documents."""
        if not site_allowed(self.domain, request.constraints):
            return []
        params = {"q": request.query, "locale": self.locale, "size": str(min(request.top_k, 100))}
        resp = await self.get("/api/v1/search", params, check_status=False)
        payload = resp.json(lane=self.name, provider=self.provider) if resp.body else None
        if resp.status == 400 and isinstance(payload, dict) and isinstance(payload.get("errors"), dict):
            detail = "; ".join(f"{k}: {e.get('message')}" for k, errs in payload["errors"].items() for e in errs)
            raise LaneBadResponse(f"MDN rejected the query: {detail}", lane=self.name, provider=self.provider)
        raise_for_status(resp, lane=self.name, provider=self.provider)
        return self._convert(payload)

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
                    id=url,
                    rank=len(hits) + 1,
                    score=float(score) if isinstance(score, int | float) else 1.0 / (len(hits) + 1),
                    title=clean_html(str(raw.get("title") or "")),
                    text=text,
                    url=url,
                    domain=self.domain,
                    source_kind=SourceKind.WEB,
                    source_ref=f"mdn:{raw.get('slug', raw['mdn_url'])}",
                    metadata={"keyless": True, "locale": raw.get("locale"), "popularity": raw.get("popularity")},
                )
            )
        return hits


BACKEND = Backend(name="mdn", lane=MdnWebLane)
"""MDN Web Docs' public search API (keyless)."""
