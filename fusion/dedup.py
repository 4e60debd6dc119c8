"""Cross-lane deduplication of fused candidates (seed 003), never quadratic in the number of candidates.

Two candidates are duplicates when any criterion holds (thresholds from ``[fusion.dedup]``):

- ``content``: equal normalised text (case-folded, whitespace collapsed); found among equal SimHashes, which
  equal texts always have, so it costs nothing beyond the SimHash step;
- ``title``: same non-empty domain and title word-set Jaccard ≥ ``title_jaccard`` (0.8);
- ``url``: URL similarity ≥ ``url_similarity`` (0.9), where similarity is the Jaccard of the token sets of the
  normalised URLs (:func:`fusion.urls.normalise_url`: scheme, ``www.``, port, trailing slash, fragment and tracking
  parameters dropped, query sorted; tokens are the host, the path segments tagged with their position, and
  the query pairs). Only ``http(s)`` URLs take part (``doc:`` references name whole documents, not passages);
- ``near``: SimHash similarity ``1 - hamming / 64`` ≥ ``near_duplicate`` (0.9) of the bodies (:mod:`fusion.simhash`).

Cost: exact criteria are dict lookups. Jaccard criteria use prefix filtering (tokens ordered rarest first; two
sets can reach Jaccard t only if they share one of their first ``|x| - ⌈t·|x|⌉ + 1`` tokens), blocked by domain
for titles; only group representatives are indexed, so a pile of copies costs one comparison each. SimHash:
identical signatures are grouped with ``numpy.unique``; distinct ones are looked up in 28 exact-match tables
keyed by a pair of the signature's 8 bytes (pigeonhole: a pair within ``d ≤ 6`` bits has at most 6 dirty bytes,
so two clean bytes, so one table where the keys agree), vectorised: per table, sort the 16-bit keys and compare
only neighbours with equal keys (≈ n² / 2¹⁷ random collisions per table). ``find_duplicates`` returns the
comparison count.

Merging (union-find): the representative is the member ahead by ``(stage, best rank, id)``; it keeps the
union of lanes, the best rank per lane (with that rank's native score), the highest normalised score per lane,
and ``merged`` (the other ids). The criterion of each merge goes to ``merged_by``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from itertools import chain, combinations
from operator import itemgetter
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabric.config import DedupConfig
from fusion.simhash import simhash_many
from fusion.types import Candidate, FusionRun
from fusion.urls import normalise_url, url_tokens

__all__ = ["Deduplicator", "find_duplicates"]

_SMALL = 256
"""Up to this many sets, the prefix order is lexicographic (no frequency count needed)."""


class _Groups:
    """Union-find over candidate indices; each group's root is its member with the smallest ``key``."""

    def __init__(self, n: int, key: Callable[[int], tuple[int, int, str]] | None = None) -> None:
        self.parent = list(range(n))
        self.why: dict[int, str] = {}
        self.key = key

    def find(self, i: int) -> int:
        p = self.parent
        while p[i] != i:
            p[i] = p[p[i]]
            i = p[i]
        return i

    def union(self, a: int, b: int, why: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        key = self.key
        if (key(rb) < key(ra)) if key is not None else rb < ra:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.why[rb] = why


def _jaccard_join(items: list[tuple[int, str, frozenset[str]]], t: float, g: _Groups, why: str) -> int:
    """Prefix-filtered set-similarity join within blocks; unions pairs with Jaccard ≥ t; returns comparisons."""
    # Any fixed global token order keeps prefix filtering exact; rarest-first keeps buckets small on big inputs.
    order: Callable[[str], Any] | None = None
    if len(items) > _SMALL:
        df = Counter(chain.from_iterable(s for _, _, s in items))
        order = {tok: r for r, (tok, _) in enumerate(sorted(df.items(), key=itemgetter(1, 0)))}.__getitem__
    blocks: dict[str, dict[str, list[tuple[int, frozenset[str]]]]] = {}
    comparisons = 0
    for i, block, s in items:
        n = len(s)
        if not n:
            continue
        prefix = (sorted(s) if order is None else sorted(s, key=order))[: n - math.ceil(t * n) + 1]
        index = blocks.setdefault(block, {})
        seen: set[int] = set()
        merged = False
        for tok in prefix:
            bucket = index.get(tok)
            if not bucket:
                continue
            for j, other in bucket:
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


def _tables(max_bits: int) -> list[tuple[int, ...]]:
    """Byte positions forming each lookup table's key: every pair of the 8 bytes (exact for ≤ 6 bits), else bytes."""
    if 8 - max_bits >= 2:  # ≤ 6 dirty bytes leave ≥ 2 clean ones, so some pair of bytes is clean
        return list(combinations(range(8), 2))
    return [(b,) for b in range(8)]  # exact for 7 bits (one clean byte)


def _table_keys(sigs: NDArray[np.uint64], max_bits: int) -> NDArray[np.uint64]:
    """One row of keys per table; a table's number is in the high bits so rows never collide."""
    n = len(sigs)
    if max_bits >= 8:  # looser thresholds: max_bits + 1 bit bands (pigeonhole), narrower and busier
        bands = min(64, max_bits + 1)
        width = 64 // bands
        shifts = np.array([width * b for b in range(bands)], dtype=np.uint64)[:, None]
        low = (sigs[None, :] >> shifts) & np.uint64((1 << width) - 1)
        return (np.arange(bands, dtype=np.uint64)[:, None] << np.uint64(width)) | low
    octets = sigs.view(np.uint8).reshape(n, 8).astype(np.uint64)
    tables = np.array(_tables(max_bits), dtype=np.intp)
    keys = np.arange(len(tables), dtype=np.uint64)[:, None]
    for k in range(tables.shape[1]):
        keys = (keys << np.uint64(8)) | octets[:, tables[:, k]].T
    return keys


def _near_pairs(sigs: NDArray[np.uint64], max_bits: int) -> tuple[list[tuple[int, int]], int]:
    """Index pairs within ``max_bits``, found through exact-match tables on byte pairs, and the comparisons made."""
    n = len(sigs)
    if n < 2:
        return [], 0
    keys = _table_keys(sigs, max_bits)
    # (table, key, index) packed in one uint64 so a plain sort groups equal keys and carries the index along.
    packed = np.sort(((keys << np.uint64(32)) | np.arange(n, dtype=np.uint64)).ravel())
    group, idx = packed >> np.uint64(32), (packed & np.uint64(0xFFFFFFFF)).astype(np.intp)
    found: set[tuple[int, int]] = set()
    comparisons = 0
    for d in range(1, len(packed)):  # entries d apart in sorted order are candidates when (table, key) agree
        at = np.flatnonzero(group[d:] == group[:-d])
        if not len(at):
            break
        i, j = idx[at], idx[at + d]
        comparisons += len(at)
        close = np.bitwise_count(sigs[i] ^ sigs[j]) <= max_bits
        found.update(zip(np.minimum(i, j)[close].tolist(), np.maximum(i, j)[close].tolist(), strict=True))
    return sorted(found), comparisons


def _norm_text(text: str) -> str:
    return " ".join(text.casefold().split())


def find_duplicates(cands: list[Candidate], cfg: DedupConfig) -> tuple[_Groups, int]:
    """Group duplicates among ``cands``; each group's root is its best member by ``(stage, best rank, id)``.

    Returns:
        The groups (union-find) and the number of pairwise comparisons made.
    """
    hits = [c["hit"] for c in cands]
    g = _Groups(len(hits), lambda i: (cands[i]["stage"], cands[i]["best"], cands[i]["id"]))
    by_url: dict[str, int] = {}
    long_urls: list[tuple[int, str, frozenset[str]]] = []
    by_domain: dict[str, list[int]] = {}
    for i, h in enumerate(hits):
        if h.url.startswith(("https://", "http://")):
            nurl = normalise_url(h.url)
            j = by_url.setdefault(nurl, i)
            if j != i:
                g.union(j, i, "url")
            elif nurl.count("/") + nurl.count("&") >= 8:  # shorter token sets only reach 0.9 when equal
                long_urls.append((i, "", url_tokens(nurl)))
        if h.title and h.domain:
            by_domain.setdefault(h.domain, []).append(i)
    titles = [
        (i, d, frozenset(hits[i].title.casefold().split())) for d, ids in by_domain.items() if len(ids) > 1 for i in ids
    ]
    comparisons = _jaccard_join(titles, cfg.title_jaccard, g, "title")
    comparisons += _jaccard_join(long_urls, cfg.url_similarity, g, "url")
    raw = [h.simhash for h in hits]
    if None in raw:
        missing = [i for i, s in enumerate(raw) if s is None and hits[i].text]
        for i, s in zip(missing, simhash_many([hits[i].text for i in missing]), strict=True):
            raw[i] = s
    if None in raw:
        idx = np.flatnonzero(np.fromiter((s is not None for s in raw), dtype=bool, count=len(raw)))
        sigs = np.array([raw[i] for i in idx.tolist()], dtype=np.uint64)
    else:
        idx, sigs = np.arange(len(raw)), np.array(raw, dtype=np.uint64)
    # Identical signatures first (a pile of copies costs one step each), then the table search over distinct ones.
    uniq, first, inverse = np.unique(sigs, return_index=True, return_inverse=True)
    reps = idx[first[inverse]]
    for k in np.flatnonzero(reps != idx).tolist():
        a, b = int(reps[k]), int(idx[k])
        ta, tb = hits[a].text, hits[b].text
        g.union(a, b, "content" if ta == tb or _norm_text(ta) == _norm_text(tb) else "near")
    pairs, near_cmp = _near_pairs(uniq, math.floor((1.0 - cfg.near_duplicate) * 64 + 1e-9))
    firsts = idx[first].tolist()
    for pa, pb in pairs:
        g.union(firsts[pa], firsts[pb], "near")
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
    rep["best"] = min(rep["best"], dup["best"])


class Deduplicator:
    """Stage: merge duplicate candidates (see the module docstring for the criteria)."""

    def __init__(self, cfg: DedupConfig, on_merge: Callable[[str], None] | None = None) -> None:
        """Keep the thresholds; ``on_merge(criterion)`` is called once per merged candidate."""
        self.cfg = cfg
        self.on_merge = on_merge

    def __call__(self, cands: list[Candidate], run: FusionRun) -> list[Candidate]:
        """Return the representatives, each carrying its merged duplicates."""
        groups, _ = find_duplicates(cands, self.cfg)
        if not groups.why:
            return cands
        for i in sorted(groups.why):  # members that lost to a root, in candidate order
            _merge(cands[groups.find(i)], cands[i])
            if self.on_merge is not None:
                self.on_merge(groups.why[i])
        return [c for i, c in enumerate(cands) if i not in groups.why]
