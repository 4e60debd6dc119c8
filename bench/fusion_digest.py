"""A behaviour digest of fusion: one SHA-256 over everything ``fuse`` returns for thousands of seeded random inputs.

Speed work on :mod:`fusion` must not change what it returns, down to the last bit of a float and the order of a
dict's keys. This bench builds ``--cases`` random fusion calls of many shapes from one seed (0–9 lanes of 0–60
hits, now and then a few hundred; every status and fusion mode; CombMNZ; dedup on and off; stage maps; odd factor
weights and thresholds; hits with and without their stored dedup features, stored keys that disagree with the
computed ones, in-lane repeats, near and exact copies, long URLs, non-finite scores, naive and aware dates, ...)
and hashes, per call:

- every fused item, best first: the representative hit (``repr``: every field), ``score_total``, the ``scores``
  and ``ranks`` dicts in their key order, ``lanes``, ``stage_priority`` and ``merged_ids`` (the explanation);
- ``candidates``, ``removed``, ``duplicates`` (in key order) and ``mode``;
- with dedup on, :func:`fusion.dedup.find_duplicates` on the collected table: each row's group root, the merge
  criteria and the comparison count;
- or the exception's type and message when the call is refused.

Items are read the ways the engine and the API read them (a first page slice, single indexes, then all), as they
are built lazily. Floats enter the digest as ``repr`` (exact). Compare ``digest`` before and after a change, also
under another ``PYTHONHASHSEED``: inputs are built from the seed alone, so equal code gives equal digests.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from fabric.core.models import FusionMode, Hit, LaneKind, LaneOutcome, LaneStatus
from fabric.settings import AuthorityEntry, DedupConfig, FactorWeights, FusionConfig
from fusion.combine import collect
from fusion.dedup import find_duplicates
from fusion.pipeline import FusionContext, fuse
from fusion.simhash import simhash_many
from fusion.text import title_key
from fusion.urls import url_key

__all__ = ["add_arguments", "case", "digest_case", "run"]

NOW = datetime(2026, 1, 1, tzinfo=UTC)
_DOMAINS = ("", "a.org", "b.com", "www.c.net", "en.wikipedia.org", "wikipedia.org", "d.io", "E.COM")
_AUTH = ("a.org", "b.com", "wikipedia.org", "com", "e.com")
_LANES = ("kw", "vec", "graph", "web", "news", "mk", "kw2", "vec2", "z", "a")
_STATUSES = (*[LaneStatus.SUCCESS] * 6, LaneStatus.FALLBACK, LaneStatus.ERROR, LaneStatus.TIMEOUT, LaneStatus.SKIPPED)
_MODES = tuple(FusionMode)


def _words(rng: random.Random, vocab: list[str], lo: int, hi: int) -> str:
    return " ".join(rng.choices(vocab, k=rng.randint(lo, hi)))


def _url(rng: random.Random, title: str) -> str:
    slug = "-".join(title.lower().split()[:3]) or "x"
    pick = rng.random()
    if pick < 0.1:
        return rng.choice(("", f"doc:{slug}", f"ftp://h/{slug}", "http://www.", "https://"))
    host = rng.choice(("www.a.org", "b.com", "B.com:443", "c.net:8080", "user@d.io"))
    depth = rng.choice((1, 1, 2, 4, 8, 9))
    path = "/".join(rng.choice((slug, "p", "q", "r", "s")) for _ in range(depth))
    query = rng.choice(("", "", "?utm_source=x", "?b=2&a=1", "?a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8", "?gclid=1#f"))
    return f"{rng.choice(('https', 'http'))}://{host}/{path}{rng.choice(('', '/'))}{query}"


def _date(rng: random.Random) -> datetime | None:
    pick = rng.random()
    if pick < 0.3:
        return None
    if pick < 0.35:
        return datetime(2025, 6, 1)  # naive: taken as UTC
    if pick < 0.37:
        return NOW + timedelta(days=3)
    return NOW - timedelta(seconds=rng.randint(0, 800 * 86400), microseconds=rng.randint(0, 999999))


def _text(rng: random.Random, vocab: list[str]) -> str:
    pick = rng.random()
    if pick < 0.05:
        return rng.choice(("", "  ", "...", "!"))
    return _words(rng, vocab, 1, 40)


def _pool(rng: random.Random, n: int) -> list[Hit]:
    vocab = [f"w{i}" for i in range(rng.choice((4, 12, 60, 600)))] + ["Ünï", "ß", "The", "the", "ΣΑ"]
    docs: list[Hit] = []
    for i in range(n):
        title = "" if rng.random() < 0.08 else _words(rng, vocab, 1, rng.choice((3, 8, 14)))
        docs.append(Hit(
            id=f"d{i}", rank=1, score=0.0, title=title, text=_text(rng, vocab), url=_url(rng, title),
            domain=rng.choice(_DOMAINS), published_at=_date(rng),
            quality=None if rng.random() < 0.2 else rng.choice((rng.random(), 0.8, 1.0, -0.1, 0.0)),
        ))  # fmt: skip
    for _ in range(rng.randint(0, n // 3)):  # copies under another id: exact, case/space variants, near, same URL
        src, at = docs[rng.randrange(n)], rng.randrange(n)
        words = src.text.split() or ["x"]
        how = rng.random()
        if how < 0.3:
            words[rng.randrange(len(words))] = "changed"
            text = " ".join(words)
        else:
            text = src.text.upper() if how < 0.5 else "  ".join(words) if how < 0.7 else src.text
        url = rng.choice((src.url, docs[at].url, src.url + "?gclid=2"))
        docs[at] = replace(src, id=docs[at].id, text=text, url=url)
    return [_features(rng, d) for d in docs]


def _features(rng: random.Random, d: Hit) -> Hit:
    """Stored features (as ingestion writes them), missing ones (a web hit), or stored ones that disagree."""
    pick = rng.random()
    if pick < 0.25:
        return d
    sig = simhash_many([d.text])[0]
    tk, uk = title_key(d.title), url_key(d.url)
    if pick < 0.3:  # a cut title key (the sanitiser's limit), a flipped SimHash bit, an empty URL key
        tk = tk[: rng.randint(0, len(tk))]
        sig = None if sig is None else sig ^ (1 << rng.randrange(64))
        uk = rng.choice((uk, ""))
    return replace(d, simhash=sig, title_key=tk, url_key=uk)


def _score(rng: random.Random, r: int) -> float:
    pick = rng.random()
    if pick < 0.02:
        return rng.choice((math.nan, math.inf, -math.inf))
    if pick < 0.1:
        return 1.0
    return round(rng.uniform(-2.0, 30.0) / r, rng.choice((2, 6, 12)))


def _lane(rng: random.Random, name: str, pool: list[Hit], big: bool) -> LaneOutcome:
    size = rng.randint(0, 300 if big else rng.choice((5, 20, 60, 60)))
    picked = [pool[rng.randrange(len(pool))] for _ in range(size)]
    if rng.random() < 0.7:  # most lanes hold each id once
        picked = list({h.id: h for h in picked}.values())
    hits = tuple(replace(h, rank=r, score=_score(rng, r)) for r, h in enumerate(picked, 1))
    return LaneOutcome(
        lane=name, kind=rng.choice(tuple(LaneKind)), provider="p", status=rng.choice(_STATUSES), hits=hits,
        weight=rng.choice((1.0, 1.0, 0.8, 0.5, 0.0, 2.0, -0.5)),
    )  # fmt: skip


def _context(rng: random.Random, lanes: list[str]) -> FusionContext:
    w = [rng.choice((0.5, 0.2, 0.0, 1.0, -0.1, 0.05)) for _ in range(5)]
    dedup = DedupConfig(
        title_jaccard=rng.choice((0.8, 0.8, 0.5, 1.0, 0.3)),
        url_similarity=rng.choice((0.9, 0.9, 0.6, 1.0)),
        near_duplicate=rng.choice((0.9, 0.9, 0.95, 0.8, 0.7, 1.0, 0.5)),
    )
    config = FusionConfig(
        mode=rng.choice(_MODES), rrf_k=rng.choice((60,) * 12 + (1, 10, 0)), combmnz=rng.random() < 0.2,
        factors=FactorWeights(rrf=w[0], domain_diversity=w[1], recency=w[2], authority=w[3], quality=w[4]),
        dedup=dedup,
    )  # fmt: skip
    authority = {d: AuthorityEntry(score=rng.random(), keyless=rng.random() < 0.3) for d in _AUTH if rng.random() < 0.5}
    stage_of = {n: rng.choice((1, 2)) for n in lanes if rng.random() < 0.5} if rng.random() < 0.4 else {}
    return FusionContext(
        config=config, now=rng.choice((NOW, NOW, datetime(2026, 1, 1), datetime(1, 6, 1, tzinfo=UTC))),
        mode=rng.choice((None, None, *_MODES)), authority=authority, authority_default=rng.choice((0.5, 0.2)),
        stage_of=stage_of, combmnz=rng.random() < 0.1, dedup=rng.random() < 0.85,
    )  # fmt: skip


def case(seed: int) -> tuple[dict[str, LaneOutcome], FusionContext, int]:
    """Case ``seed``: the outcomes, the context and how items are read (a page size; 0 reads by index)."""
    rng = random.Random(seed)
    big = rng.random() < 0.08
    pool = _pool(rng, rng.choice((1, 3, 20, 80, 200)) if not big else 600)
    names = rng.sample(_LANES, rng.randint(0, 9))
    outcomes = {n: _lane(rng, n, pool, big) for n in names}
    return outcomes, _context(rng, names), rng.choice((0, 10, 30))


def _item_record(item: Any) -> str:
    return repr((item.hit, item.score_total, list(item.scores.items()), item.lanes, list(item.ranks.items()),
                 item.stage_priority, item.merged_ids))  # fmt: skip


def digest_case(outcomes: dict[str, LaneOutcome], ctx: FusionContext, page: int) -> tuple[str, int, int | None]:
    """The record of one call (what the digest hashes), its item count and ``removed`` (None: refused)."""
    try:
        out = fuse(outcomes, ctx)
        items = out.items
        if page:
            first = [_item_record(i) for i in items[:page]]
        else:
            first = [_item_record(items[i]) for i in range(-1, -min(3, len(items)) - 1, -1)]
        rest = [_item_record(i) for i in items]
        head = repr((out.candidates, out.removed, list(out.duplicates.items()), out.mode.value))
        record = "\n".join([head, *first, *rest])
    except Exception as exc:  # a refused call is behaviour too: its exception is hashed
        return f"{type(exc).__name__}: {exc}", 0, None
    if ctx.dedup:
        _, cands = collect(outcomes, ctx)
        groups, comparisons = find_duplicates(cands, ctx.config.dedup)
        roots = groups.roots(range(len(cands)))
        record += "\n" + repr((roots, sorted(groups.why.items()), comparisons))
    return record, len(items), out.removed


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Hash ``args.cases`` seeded cases; report the digest and how much the cases exercised."""
    h = hashlib.sha256()
    items = removed = refused = 0
    for i in range(args.cases):
        record, n, gone = digest_case(*case(args.seed * 1_000_003 + i))
        h.update(record.encode())
        h.update(b"\x00")
        items += n
        if gone is None:
            refused += 1
        else:
            removed += gone
    return {"digest": h.hexdigest(), "cases": args.cases, "items": items, "removed": removed, "refused": refused}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``fabric bench fusion_digest``."""
    parser.add_argument("--cases", type=int, default=2500, help="random fusion calls to hash (default 2500)")
    parser.add_argument("--seed", type=int, default=13, help="seed of the cases (default 13)")
