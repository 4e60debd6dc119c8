"""An in-memory engine over a BEIR corpus for harness tests: two toy lanes, fused with the project's RRF."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fabric.core.models import (
    FusedItem,
    Hit,
    LaneKind,
    LaneOutcome,
    LaneStatus,
    PreflightResult,
    SearchRequest,
    SearchResult,
)
from fusion.rrf import fuse_rrf

_WORD = re.compile(r"[a-z0-9]+")


def _terms(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _grams(text: str) -> set[str]:
    t = text.lower()
    return {t[i : i + 3] for i in range(len(t) - 2)}


class FakeEngine:
    """Keyword lane = term overlap, vector lane = trigram Jaccard; chunk ids are ``<doc>#0`` / ``<doc>#1``."""

    def __init__(self, corpus: Path, *, overhead_ms: float = 1.0, intent: str | None = "factual") -> None:
        self.docs = {}
        for line in corpus.read_text().splitlines():
            row = json.loads(line)
            self.docs[row["_id"]] = f"{row.get('title', '')} {row['text']}"
        self.overhead_ms = overhead_ms
        self.intent = intent
        self.requests: list[SearchRequest] = []

    def _lane(self, name: str, query: str, top_k: int) -> LaneOutcome:
        scored = []
        for doc_id, text in self.docs.items():
            if name == "keyword":
                score = float(len(_terms(query) & _terms(text)))
            else:
                q, d = _grams(query), _grams(text)
                score = len(q & d) / len(q | d) if q | d else 0.0
            if score > 0:
                scored.append((score, doc_id))
        scored.sort(key=lambda s: (-s[0], s[1]))
        hits = []
        for score, doc_id in scored[:top_k]:
            # two chunks per document, so the harness must dedupe doc ids keeping the first
            for part in (0, 1):
                # the graph lane's hits name the query terms found in the document, as matched entities
                meta = (
                    {"matched_entities": sorted(_terms(query) & _terms(self.docs[doc_id]))} if name == "graph" else {}
                )
                hits.append(
                    Hit(
                        id=f"{doc_id}#{part}", rank=len(hits) + 1, score=score - part * 1e-6, doc_id=doc_id,
                        metadata=meta,
                    )
                )  # fmt: skip
        kind = {"keyword": LaneKind.KEYWORD, "graph": LaneKind.GRAPH}.get(name, LaneKind.VECTOR)
        return LaneOutcome(lane=name, kind=kind, provider=f"fake_{name}", status=LaneStatus.SUCCESS, hits=tuple(hits))

    async def search(self, request: SearchRequest) -> SearchResult:
        """Answer with the requested lanes fused by RRF."""
        self.requests.append(request)
        lanes = request.lanes or ("keyword", "vector")
        outcomes = {name: self._lane(name, request.query, request.top_k) for name in lanes}
        rrf = fuse_rrf({n: [h.id for h in o.hits] for n, o in outcomes.items()})
        hits = {h.id: h for o in outcomes.values() for h in o.hits}
        order = sorted(rrf, key=lambda i: (-rrf[i], i))[: request.top_k]
        items = tuple(
            FusedItem(hit=hits[i], score_total=rrf[i], scores={"rrf": rrf[i]}, lanes=(), ranks={}) for i in order
        )
        return SearchResult(
            query=request.query,
            mode=request.mode,
            trace_id="t",
            items=items,
            lanes=outcomes,
            preflight=PreflightResult(bypassed=False, refined_query=request.query, intent=self.intent),
            timings={"total_ms": 1.0, "overhead_ms": self.overhead_ms},
            stages={"stage2_outcome": "not_triggered", "stage2_used": False, "stage1_ms": 2.0, "stage2_ms": 0.0},
        )
