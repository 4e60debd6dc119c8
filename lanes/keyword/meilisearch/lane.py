"""Keyword lane over Meilisearch, spoken through its REST API with the shared aiohttp session.

Why REST over aiohttp rather than the official ``meilisearch`` SDK in a thread: the SDK is synchronous
(``requests``), so each call would hold a worker thread that *cannot be cancelled* when the executor cuts the
lane at its budget; the thread keeps running (and holding a connection) until the SDK's own timeout. Over
aiohttp the call is cancelled the moment the budget ends, shares the app session's connection limits, DNS cache
and allow-list, and needs no thread pool sized for the worst case. The wire format is small and stable
(``POST /indexes/{uid}/search``), so the SDK would add little.

The request asks ``showRankingScore`` and surfaces ``_rankingScore`` (0..1) as the hit's lexical score. Filters
come from :class:`~fabric.core.models.BoundConstraints`, built as Meilisearch filter expressions with every string
value quoted and escaped (never spliced raw); quoted phrases are passed as Meilisearch phrase search. Index
settings are applied on ingest by :class:`lanes.keyword.meilisearch.writer.MeilisearchWriter`.

Options (``lanes.toml``)::

    [lanes.keyword]
    kind = "keyword"
    backend = "meilisearch"
    options = { url = "http://meilisearch:7700", index = "chunks", timeout_s = 2.0 }

``url`` (required; ``FABRIC_MEILI_URL``), ``api_key`` (``FABRIC_MEILI_KEY``), ``index`` (default ``chunks``),
``timeout_s`` (default 5), ``keep_undated`` (default true: a date bound keeps documents without a date); the
writer's ``write_timeout_s``, ``task_timeout_s`` and ``batch_size``. One parser reads them for the lane and the
writer: :class:`~lanes.keyword.meilisearch.writer.MeiliOptions`.
"""

from __future__ import annotations

from typing import Any

from fabric.core.errors import LaneBadResponse
from fabric.core.models import BoundConstraints, Hit, LaneRequest
from lanes.base import Backend, BaseLane, LaneResources, LaneSpec
from lanes.keyword.meilisearch.writer import MeiliOptions, MeilisearchWriter, meili_request
from lanes.server_records import record_hit

__all__ = ["BACKEND", "MeilisearchKeywordLane", "build_filter", "quote_value"]

_FIELDS = [
    "chunk_id",
    "doc_id",
    "title",
    "text",
    "url",
    "domain",
    "published_ts",
    "source_kind",
    "source_ref",
    "trust",
    "quality",
]


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
        self.opts = MeiliOptions.parse(spec, resources.tenant)
        self.index = self.opts.index

    def _body(self, request: LaneRequest) -> dict[str, Any]:
        q = request.query
        for phrase in request.constraints.phrases:
            if f'"{phrase}"' not in q:
                q += ' "' + phrase.replace('"', " ") + '"'
        body: dict[str, Any] = {
            "q": q,
            "limit": request.top_k,
            "showRankingScore": True,
            "attributesToRetrieve": _FIELDS,
        }
        flt = build_filter(request.constraints, keep_undated=self.opts.keep_undated)
        if flt:
            body["filter"] = flt
        return body

    async def search(self, request: LaneRequest) -> list[Hit]:
        """``POST /indexes/{index}/search`` and convert the hits."""
        payload = await meili_request(
            self.resources.http,
            self.opts,
            "POST",
            f"/indexes/{self.index}/search",
            self._body(request),
            timeout_s=self.opts.timeout_s,
            lane=self.name,
        )
        raw_hits = payload.get("hits") if isinstance(payload, dict) else None
        if not isinstance(raw_hits, list):
            raise LaneBadResponse("Meilisearch answer has no 'hits' list", lane=self.name, provider=self.provider)
        return [
            record_hit(doc, rank=i + 1, score=_score(doc), source_ref=f"meilisearch:{self.index}")
            for i, doc in enumerate(raw_hits[: request.top_k])
            if isinstance(doc, dict)
        ]


def _score(doc: dict[str, Any]) -> float:
    score = doc.get("_rankingScore")
    return float(score) if isinstance(score, int | float) else 0.0


BACKEND = Backend(
    name="meilisearch",
    lane=MeilisearchKeywordLane,
    writer=MeilisearchWriter,
    options=MeiliOptions.parse,
    env={"FABRIC_MEILI_URL": "url", "FABRIC_MEILI_KEY": "api_key"},
    secrets=frozenset({"api_key"}),
    self_hosted=True,
)
"""The Meilisearch backend: keyword lane and index writer over one server."""
