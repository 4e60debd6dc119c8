"""Cross-lane deduplication of fused candidates (seed 003), never quadratic in the number of candidates.

Two candidates are duplicates when any criterion holds (thresholds from ``[fusion.dedup]``):

- ``content``: equal normalised text (case-folded, whitespace collapsed); found among equal SimHashes, which
  equal texts always have, so it costs nothing beyond the SimHash step;
- ``title``: same non-empty domain and title word-set Jaccard ≥ ``title_jaccard`` (0.8);
- ``url``: URL similarity ≥ ``url_similarity`` (0.9), where similarity is the Jaccard of the token sets of the
  normalised URLs (:func:`normalise_url`: scheme, ``www.``, port, trailing slash, fragment and tracking
  parameters dropped, query sorted; tokens are the host, the path segments tagged with their position, and
  the query pairs). Only ``http(s)`` URLs take part (``doc:`` references name whole documents, not passages);
- ``near``: SimHash similarity ``1 - hamming / 64`` ≥ ``near_duplicate`` (0.9) of the bodies (:mod:`fusion.simhash`).

Cost: exact criteria are dict lookups. Jaccard criteria use prefix filtering (tokens ordered rarest first; two
sets can reach Jaccard t only if they share one of their first ``|x| - ⌈t·|x|⌉ + 1`` tokens), blocked by domain
for titles; only group representatives are indexed, so a pile of copies costs one comparison each. SimHash:
identical signatures are grouped with ``numpy.unique``; distinct ones are searched in ``d + 1`` bands for a
distance budget ``d`` (pigeonhole: a pair within ``d`` bits agrees on a whole band), vectorised: per band, sort
the band keys and compare only neighbours with equal keys. ``find_duplicates`` returns the comparison count.

Merging (union-find): the representative is the candidate ahead by ``(stage, best rank, id)``; it keeps the
union of lanes, the best rank per lane (with that rank's native score), the highest normalised score per lane,
and ``merged`` (the other ids). The criterion of each merge goes to ``merged_by``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from itertools import chain

import numpy as np
from numpy.typing import NDArray

from fabric.config import DedupConfig
from fusion.simhash import simhash_many
from fusion.types import Candidate, FusionRun

__all__ = ["TRACKING_PARAMS", "Deduplicator", "find_duplicates", "normalise_url", "url_tokens"]

TRACKING_PARAMS = frozenset({"gclid", "fbclid", "msclkid", "dclid", "yclid", "mc_cid", "mc_eid", "_ga", "igshid"})
"""Query parameters dropped by :func:`normalise_url` (plus every ``utm_*``)."""


def normalise_url(url: str) -> str:
    """``host/path?sorted&query`` without scheme, ``www.``, default port, trailing slash, fragment or tracking."""
    rest = url.strip()
    rest = rest.partition("://")[2] or rest
    if "#" in rest:
        rest = rest.partition("#")[0]
    hostpart, slash, tail = rest.partition("/")
    host = hostpart.lower()
    if "@" in host or ":" in host:
        host = host.rpartition("@")[2]
        if host.endswith((":80", ":443")):
            host = host.rpartition(":")[0]
    host = host.removeprefix("www.")
    if "?" not in tail:
        return host + (slash + tail).rstrip("/")
    path, _, query = (slash + tail).partition("?")
    keys = [(p, p.partition("=")[0].lower()) for p in query.split("&") if p]
    query = "&".join(sorted(p for p, key in keys if not key.startswith("utm_") and key not in TRACKING_PARAMS))
    path = path.rstrip("/")
    return f"{host}{path}?{query}" if query else f"{host}{path}"


def url_tokens(normalised: str) -> frozenset[str]:
    """Tokens of a normalised URL: host, ``i:segment`` per path segment, ``q:pair`` per query pair."""
    head, _, query = normalised.partition("?")
    host, _, path = head.partition("/")
    toks = {"h:" + host}
    toks.update(f"{i}:{seg}" for i, seg in enumerate(path.split("/")) if seg)
    toks.update("q:" + p for p in query.split("&") if p)
    return frozenset(toks)


_SMALL = 256
"""Up to this many sets, the prefix order is lexicographic (no frequency count needed)."""


class _Groups:
    """Union-find over candidate indices; the root is the lowest index (the best candidate)."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))
        self.why: dict[int, str] = {}

    def find(self, i: int) -> int:
        p = self.parent
        while p[i] != i:
            p[i] = p[p[i]]
            i = p[i]
        return i

    def union(self, a: int, b: int, why: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            lo, hi = min(ra, rb), max(ra, rb)
            self.parent[hi] = lo
            self.why[hi] = why


def _jaccard_join(items: list[tuple[int, str, frozenset[str]]], t: float, g: _Groups, why: str) -> int:
    """Prefix-filtered set-similarity join within blocks; unions pairs with Jaccard ≥ t; returns comparisons."""
    # Any fixed global token order keeps prefix filtering exact; rarest-first keeps buckets small on big inputs.
    rarity = Counter(chain.from_iterable(s for _, _, s in items)).__getitem__ if len(items) > _SMALL else None
    blocks: dict[str, dict[str, list[tuple[int, frozenset[str]]]]] = {}
    comparisons = 0
    for i, block, s in items:
        if not s:
            continue
        toks = sorted(s) if rarity is None else sorted(sorted(s), key=rarity)  # stable: ties by the token
        prefix = toks[: len(s) - math.ceil(t * len(s)) + 1]
        index = blocks.setdefault(block, {})
        seen: set[int] = set()
        merged = False
        for tok in prefix:
            for j, other in index.get(tok, ()):
                if j in seen or g.find(j) == g.find(i):
                    continue
                seen.add(j)
                comparisons += 1
                if len(s & other) >= t * len(s | other):
                    g.union(i, j, why)
                    merged = True
        if not merged:
            for tok in prefix:
                index.setdefault(tok, []).append((i, s))
    return comparisons


def _near_pairs(sigs: NDArray[np.uint64], max_bits: int) -> tuple[list[tuple[int, int]], int]:
    """Index pairs within ``max_bits`` (banded: ``max_bits + 1`` bands), and how many pairs were compared."""
    n = len(sigs)
    if n < 2:
        return [], 0
    bands = max_bits + 1
    width = 64 // bands
    shifts = np.array([width * b for b in range(bands)], dtype=np.uint64)[:, None]
    masks = np.array([(1 << (64 - width * b if b == bands - 1 else width)) - 1 for b in range(bands)], np.uint64)
    keys = (sigs[None, :] >> shifts) & masks[:, None]
    order = np.argsort(keys, axis=1, kind="stable")
    ks = np.take_along_axis(keys, order, axis=1)
    found: set[tuple[int, int]] = set()
    comparisons = 0
    for d in range(1, n):  # entries d apart in a band's sorted keys are candidates when their keys are equal
        rows, cols = np.nonzero(ks[:, d:] == ks[:, :-d])
        if not len(rows):
            break
        i, j = order[rows, cols], order[rows, cols + d]
        comparisons += len(rows)
        close = np.bitwise_count(sigs[i] ^ sigs[j]) <= max_bits
        found.update(zip(np.minimum(i, j)[close].tolist(), np.maximum(i, j)[close].tolist(), strict=True))
    return sorted(found), comparisons


def _norm_text(text: str) -> str:
    return " ".join(text.casefold().split())


def find_duplicates(cands: list[Candidate], cfg: DedupConfig) -> tuple[_Groups, int]:
    """Group duplicates among ``cands`` (already in representative order); return the groups and comparisons."""
    g = _Groups(len(cands))
    by_url: dict[str, int] = {}
    long_urls: list[tuple[int, str, frozenset[str]]] = []
    domains = Counter(c["hit"].domain for c in cands)
    titles: list[tuple[int, str, frozenset[str]]] = []
    for i, c in enumerate(cands):
        h = c["hit"]
        if h.url.startswith(("http://", "https://")):
            nurl = normalise_url(h.url)
            j = by_url.setdefault(nurl, i)
            if j != i:
                g.union(j, i, "url")
            elif nurl.count("/") + nurl.count("&") >= 8:  # shorter token sets only reach 0.9 when equal
                long_urls.append((i, "", url_tokens(nurl)))
        if h.title and h.domain and domains[h.domain] > 1:
            titles.append((i, h.domain, frozenset(h.title.casefold().split())))
    comparisons = _jaccard_join(titles, cfg.title_jaccard, g, "title")
    comparisons += _jaccard_join(long_urls, cfg.url_similarity, g, "url")
    missing = [i for i, c in enumerate(cands) if c["hit"].simhash is None and c["hit"].text]
    computed = dict(zip(missing, simhash_many([cands[i]["hit"].text for i in missing]), strict=True))
    idx: list[int] = []
    raw: list[int] = []
    for i, c in enumerate(cands):
        sig = computed.get(i) if c["hit"].simhash is None else c["hit"].simhash
        if sig is not None:
            idx.append(i)
            raw.append(sig)
    sigs = np.array(raw, dtype=np.uint64)
    # Identical signatures first (a pile of copies costs one step each), then banded search over distinct ones.
    uniq, first, inverse = np.unique(sigs, return_index=True, return_inverse=True)
    for k, rep in enumerate(first[inverse].tolist()):
        if rep != k:
            ta, tb = cands[idx[rep]]["hit"].text, cands[idx[k]]["hit"].text
            g.union(idx[rep], idx[k], "content" if ta == tb or _norm_text(ta) == _norm_text(tb) else "near")
    pairs, near_cmp = _near_pairs(uniq, math.floor((1.0 - cfg.near_duplicate) * 64 + 1e-9))
    firsts = first.tolist()
    for pa, pb in pairs:
        g.union(idx[firsts[pa]], idx[firsts[pb]], "near")
    return g, comparisons + near_cmp + len(idx) - len(uniq)


def _merge(rep: Candidate, dup: Candidate) -> None:
    for lane, rank in dup["ranks"].items():
        if rank < rep["ranks"].get(lane, 1 << 30):
            rep["ranks"][lane] = rank
            rep["native"][lane] = dup["native"][lane]
    for lane, value in dup["norm"].items():
        rep["norm"][lane] = max(value, rep["norm"].get(lane, 0.0))
    rep["merged"].append(dup["id"])
    rep["merged"].extend(dup["merged"])
    rep["stage"] = min(rep["stage"], dup["stage"])


class Deduplicator:
    """Stage: merge duplicate candidates (see the module docstring for the criteria)."""

    def __init__(self, cfg: DedupConfig, on_merge: Callable[[str], None] | None = None) -> None:
        """Keep the thresholds; ``on_merge(criterion)`` is called once per merged candidate."""
        self.cfg = cfg
        self.on_merge = on_merge

    def __call__(self, cands: list[Candidate], run: FusionRun) -> list[Candidate]:
        """Return the representatives, each carrying its merged duplicates."""
        cands.sort(key=lambda c: (c["stage"], min(c["ranks"].values()), c["id"]))
        groups, _ = find_duplicates(cands, self.cfg)
        out: list[Candidate] = []
        for i, c in enumerate(cands):
            root = groups.find(i)
            if root == i:
                out.append(c)
                continue
            _merge(cands[root], c)
            if self.on_merge is not None:
                self.on_merge(groups.why[i])
        return out
