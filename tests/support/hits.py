"""Synthetic lane outcomes for tests and benchmarks: realistic, overlapping hits with ingest-time features.

A pool of documents over 24 domains (titles, ~50-word bodies, URLs with tracking parameters, dates over two
years, ~6 % near-duplicate copies and ~6 % same-page copies under tracking URLs); each lane draws its hits from
a shared relevant set plus its own tail, best first. Seeded, so every call with the same arguments gives equal hits.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from fabric.core.models import Hit, LaneKind, LaneOutcome, LaneStatus
from fusion.quality import content_quality
from fusion.simhash import simhash_many
from fusion.text import title_key
from fusion.urls import url_key

__all__ = ["NOW", "document_pool", "ingest_features", "make_outcomes"]

NOW = datetime(2026, 1, 1, tzinfo=UTC)
"""The clock the synthetic dates are relative to."""
_KINDS = (LaneKind.KEYWORD, LaneKind.VECTOR, LaneKind.GRAPH, LaneKind.WEB, LaneKind.NEWS, LaneKind.MARKETS)
_DOMAINS = (
    "wikipedia.org", "developer.mozilla.org", "github.com", "stackoverflow.com", "arxiv.org", "medium.com",
    "reuters.com", "bbc.com", "nytimes.com", "python.org", "docs.python.org", "realpython.com", "dev.to",
    "nature.com", "sciencedirect.com", "ncbi.nlm.nih.gov", "example.com", "blogspot.com", "wordpress.com",
    "bloomberg.com", "ft.com", "cnn.com", "theguardian.com", "lwn.net",
)  # fmt: skip


def document_pool(rng: random.Random, n: int) -> list[Hit]:
    """``n`` documents with ingest-time features, ~12 % of them copies of another (near or same page)."""
    vocab = [rng.choice("bcdfghjklmnprstvz") + rng.choice("aeiou") + rng.choice("bcdfgklmnrst") * rng.randint(1, 2)
             + rng.choice(("", "ing", "ion", "er", "al")) for _ in range(1500)]  # fmt: skip
    docs: list[Hit] = []
    for i in range(n):
        domain = rng.choice(_DOMAINS)
        title = " ".join(rng.choices(vocab, k=rng.randint(5, 9))).capitalize()
        text = ". ".join(" ".join(rng.choices(vocab, k=12)) for _ in range(4)) + "."
        slug = title.lower().replace(" ", "-")
        query = rng.choice(("", "", "?utm_source=feed&id=3", "?ref=home#top"))
        docs.append(Hit(
            id=f"d{i:05d}", rank=1, score=0.0, title=title, text=text, domain=domain,
            url=f"https://www.{domain}/articles/{slug}{query}",
            published_at=NOW - timedelta(hours=rng.randint(1, 24 * 730)) if rng.random() < 0.8 else None,
        ))  # fmt: skip
    for i in rng.sample(range(n), n // 16):  # near-duplicate copies (syndication) under another id and URL
        src = docs[rng.randrange(n)]
        words = src.text.split()
        words[rng.randrange(len(words))] = "changed"
        docs[i] = replace(src, id=docs[i].id, url=docs[i].url, text=" ".join(words))
    for i in rng.sample(range(n), n // 16):  # the same page seen by another lane under a tracking URL
        src = docs[rng.randrange(n)]
        docs[i] = replace(src, id=docs[i].id, url=src.url.partition("?")[0] + "?utm_campaign=x&gclid=1")
    return ingest_features(docs)


def ingest_features(docs: list[Hit]) -> list[Hit]:
    """The hits with the features ingestion stores per chunk: quality, SimHash, URL key and title key."""
    sigs = simhash_many([d.text for d in docs])
    return [
        replace(d, quality=content_quality(d.title, d.text), simhash=s, url_key=url_key(d.url),
                title_key=title_key(d.title))
        for d, s in zip(docs, sigs, strict=True)
    ]  # fmt: skip


def make_outcomes(lanes: int, per_lane: int, seed: int = 7, pool: int = 600) -> dict[str, LaneOutcome]:
    """``lanes`` overlapping synthetic outcomes of ``per_lane`` hits each, best first."""
    rng = random.Random(seed)
    docs = document_pool(rng, pool)
    relevant = docs[:80]
    out: dict[str, LaneOutcome] = {}
    for li in range(lanes):
        picked: dict[str, Hit] = {}
        while len(picked) < per_lane:
            d = rng.choice(relevant) if rng.random() < 0.6 else rng.choice(docs)
            picked.setdefault(d.id, d)
        hits = tuple(replace(h, rank=r, score=round(30.0 / (r + 2), 4)) for r, h in enumerate(picked.values(), 1))
        kind = _KINDS[li % len(_KINDS)]
        name = f"{kind.value}{li // len(_KINDS) or ''}"
        out[name] = LaneOutcome(lane=name, kind=kind, provider="synthetic", status=LaneStatus.SUCCESS, hits=hits,
                                weight=1.0 if li % 2 == 0 else 0.8)  # fmt: skip
    return out
