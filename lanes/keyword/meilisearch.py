"""Keyword lane over Meilisearch, spoken through its REST API with the shared aiohttp session.

Why REST over aiohttp rather than the official ``meilisearch`` SDK in a thread: the SDK is synchronous
(``requests``), so each call would hold a worker thread that *cannot be cancelled* when the executor cuts the
lane at its budget; the thread keeps running (and holding a connection) until the SDK's own timeout. Over
aiohttp the call is cancelled the moment the budget ends, shares the app session's connection limits, DNS cache
and allow-list, and needs no thread pool sized for the worst case. The wire format is small and stable
(``POST /indexes/{uid}/search``), so the SDK would add little.

The request asks ``showRankingScore`` and surfaces ``_rankingScore`` (0..1) as the hit's lexical score. Filters
come from :class:`~fabric.models.BoundConstraints`, built as Meilisearch filter expressions with every string
value quoted and escaped (never spliced raw); quoted phrases are passed as Meilisearch phrase search. Index
settings are applied on ingest by :class:`fabric.writers.meilisearch.MeilisearchWriter`.

Options (``lanes.toml``)::

    [lanes.keyword]
    kind = "keyword"
    backend = "meilisearch"
    options = { url = "http://meilisearch:7700", index = "chunks", timeout_s = 2.0 }

``url`` (required; ``FABRIC_MEILI_URL``), ``api_key`` (``FABRIC_MEILI_KEY``), ``index`` (default ``chunks``),
``timeout_s`` (default 5), ``keep_undated`` (default true: a date bound keeps documents without a date).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeVar

from fabric.errors import LaneBadResponse, LaneUnavailable
from fabric.httpclient import fetch, raise_for_status
from fabric.models import BoundConstraints, Hit, LaneRequest, SourceKind, Trust
from fabric.writers import simhash_of
from lanes._options import LaneOptions
from lanes.base import BaseLane, LaneResources, LaneSpec

__all__ = ["MeilisearchKeywordLane", "build_filter", "quote_value"]

_FIELDS = ["chunk_id", "doc_id", "title", "text", "url", "domain", "published_ts", "source_kind", "source_ref",
           "trust", "quality"]


def quote_value(value: str) -> str:
    """A Meilisearch filter string literal: double-quoted, with backslashes and quotes escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def build_filter(c: BoundConstraints, *, keep_undated: bool = True) -> list[str]:
    """Constraints → Meilisearch filter expressions (array form: the elements are ANDed)."""
    out: list[str] = []
    undated = " OR published_ts IS NULL" if keep_undated else ""
    if c.date_from is not None:
        out.append(f"published_ts >= {int(c.date_from.timestamp())}{undated}")
    if c.date_to is not None:
        out.append(f"published_ts <= {int(c.date_to.timestamp())}{undated}")
    if c.sites:
        out.append(f"domain IN [{', '.join(quote_value(s.lower()) for s in c.sites)}]")
    return out


class MeilisearchKeywordLane(BaseLane):
    """Meilisearch full-text search → keyword hits scored by ``_rankingScore``."""

    provider = "meilisearch"

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        super().__init__(spec, resources)
        opts = LaneOptions(spec)
        self.url = opts.text("url").rstrip("/")
        self.index = opts.text("index", "chunks")
        api_key = opts.text("api_key", "")
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout_s = opts.number("timeout_s", 5.0)
        self.keep_undated = opts.flag("keep_undated", True)

    def _body(self, request: LaneRequest) -> dict[str, Any]:
        q = request.query
        for phrase in request.constraints.phrases:
            if f'"{phrase}"' not in q:
                q += ' "' + phrase.replace('"', " ") + '"'
        body: dict[str, Any] = {"q": q, "limit": request.top_k, "showRankingScore": True,
                                "attributesToRetrieve": _FIELDS}
        flt = build_filter(request.constraints, keep_undated=self.keep_undated)
        if flt:
            body["filter"] = flt
        return body

    async def search(self, request: LaneRequest) -> list[Hit]:
        """``POST /indexes/{index}/search`` and convert the hits."""
        resp = await fetch(
            self.resources.http, "POST", f"{self.url}/indexes/{self.index}/search", json_body=self._body(request),
            headers=self.headers, timeout_s=self.timeout_s, lane=self.name, provider=self.provider, check_status=False,
        )
        if resp.status == 404:
            raise LaneUnavailable(f"index {self.index!r} not found (nothing ingested?)", lane=self.name,
                                  provider=self.provider)
        detail = ""
        if resp.status >= 400 and resp.body.startswith(b"{"):
            err = resp.json()
            detail = f"{err.get('code')}: {err.get('message')}" if isinstance(err, dict) else ""
        raise_for_status(resp, lane=self.name, provider=self.provider, detail=detail)
        payload = resp.json(lane=self.name, provider=self.provider)
        raw_hits = payload.get("hits") if isinstance(payload, dict) else None
        if not isinstance(raw_hits, list):
            raise LaneBadResponse("Meilisearch answer has no 'hits' list", lane=self.name, provider=self.provider)
        return [self._hit(doc, i + 1) for i, doc in enumerate(raw_hits[: request.top_k]) if isinstance(doc, dict)]

    def _hit(self, doc: dict[str, Any], rank: int) -> Hit:
        ts = doc.get("published_ts")
        score = doc.get("_rankingScore")
        return Hit(
            id=str(doc.get("chunk_id") or doc.get("id")), rank=rank,
            score=float(score) if isinstance(score, int | float) else 0.0,
            title=str(doc.get("title") or ""), text=str(doc.get("text") or ""), url=str(doc.get("url") or ""),
            domain=str(doc.get("domain") or ""),
            published_at=datetime.fromtimestamp(ts, UTC) if isinstance(ts, int | float) else None,
            source_kind=_enum(SourceKind, doc.get("source_kind"), SourceKind.IMPORT),
            source_ref=str(doc.get("source_ref") or f"meilisearch:{self.index}"),
            trust=_enum(Trust, doc.get("trust"), Trust.UNTRUSTED), doc_id=str(doc.get("doc_id") or ""),
            quality=float(doc["quality"]) if isinstance(doc.get("quality"), int | float) else None,
            simhash=simhash_of(doc), url_key=_key(doc, "url_key"), title_key=_key(doc, "title_key"),
        )


def _key(doc: dict[str, Any], name: str) -> str | None:
    value = doc.get(name)
    return value if isinstance(value, str) else None


_E = TypeVar("_E", SourceKind, Trust)


def _enum(cls: type[_E], value: Any, default: _E) -> _E:
    try:
        return cls(value)
    except ValueError:
        return default
