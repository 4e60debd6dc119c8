"""Cross-lane deduplication of fused candidates (the fusion policy), never quadratic in the number of candidates.

Two candidates are duplicates when any criterion holds (thresholds from ``[fusion.dedup]``):

- ``content``: equal normalised text (case-folded, whitespace collapsed); found among equal SimHashes, which
  equal texts always have, so it costs nothing beyond the SimHash step;
- ``title``: same non-empty domain and title word-set Jaccard ≥ ``title_jaccard`` (0.8);
- ``url``: URL similarity ≥ ``url_similarity`` (0.9), where similarity is the Jaccard of the token sets of the
  normalised URLs (:func:`fusion.urls.normalise_url`: scheme, ``www.``, port, trailing slash, fragment and tracking
  parameters dropped, query sorted; tokens are the host, the path segments tagged with their position, and
  the query pairs). Only ``http(s)`` URLs take part (``doc:`` references name whole documents, not passages);
- ``near``: SimHash similarity ``1 - hamming / 64`` ≥ ``near_duplicate`` (0.9) of the bodies (:mod:`fusion.simhash`).

A criterion whose ``[fusion.dedup.weights]`` weight is 0 is off (the fusion policy's table weighs domain + title,
content hash and URL 70/20/10 and has no ``near``; its deduplicator merges on any one criterion, as here).

The features compared are computed once per document at ingest and read off the hits (``Hit.simhash``,
``Hit.url_key``, ``Hit.title_key``); a hit without them (a web result) has them computed here, per call.

Cost: exact criteria are dict lookups. Jaccard criteria use the prefix-filtered join of :mod:`fusion.jaccard`
(titles blocked by domain, :mod:`fusion.titles`). SimHash: identical signatures are grouped in a dict; distinct
ones go through the pigeonhole tables of :mod:`fusion.near`. ``find_duplicates`` returns the comparison count.

Merging (union-find): the representative is the member ahead by ``(vouched for, stage, best rank, id)`` (a
trusted original or a fetched page stands for its untrusted copies, :mod:`fusion.provenance`); it keeps the
union of lanes, the best rank per lane (with that rank's native score), the highest normalised score per lane,
and ``merged`` (the other ids); ranks after a merged copy close up, as for a repeat inside a lane (criteria: ``why``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import compress
from operator import itemgetter, ne
from typing import Any

import numpy as np

from fabric.settings import DedupConfig
from fusion.jaccard import jaccard_join
from fusion.near import near_pairs
from fusion.provenance import vouched
from fusion.simhash import simhash_many
from fusion.titles import title_join
from fusion.types import Candidates, FusionRun
from fusion.unionfind import Groups
from fusion.urls import url_key, url_tokens

__all__ = ["Deduplicator", "find_duplicates"]


def _norm_text(text: str) -> str:
    return " ".join(text.casefold().split())


def _signatures(hits: Sequence[Any]) -> list[int | None]:
    """Stored SimHashes, the missing ones computed in one batch."""
    raw: list[int | None] = [h.simhash for h in hits]
    if None in raw:
        missing = [i for i, s in enumerate(raw) if s is None and hits[i].text]
        for i, s in zip(missing, simhash_many([hits[i].text for i in missing]), strict=True):
            raw[i] = s
    return raw


def _url_duplicates(hits: Sequence[Any], g: Groups) -> list[tuple[int, str, Sequence[str]]]:
    """Union equal URL keys (in row order); return the long URLs' token sets for the similarity join."""
    keys = [h.url_key for h in hits]
    if None in keys:
        keys = [u if u is not None else url_key(h.url) for u, h in zip(keys, hits, strict=True)]
    if not any(keys):  # no http(s) URL at all (local documents)
        return []
    n = len(keys)
    first = dict(zip(reversed(keys), range(n - 1, -1, -1), strict=True))  # key → its first row
    if len(first) != n:
        for i in compress(range(n), map(ne, map(first.__getitem__, keys), range(n))):
            if keys[i]:
                g.union(first[keys[i]], i, "url")
    if "#\x00" not in "\x00".join(first) + "\x00":  # no key of a long URL (they end with "#")
        return []
    return [
        (i, "", sorted(url_tokens(u[:-1]))) for u, i in sorted(first.items(), key=itemgetter(1)) if u[1:][-1:] == "#"
    ]


def find_duplicates(cands: Candidates, cfg: DedupConfig) -> tuple[Groups, int]:
    """Group duplicates among the rows of ``cands``; each group's root is its best row (see the module docstring).

    Returns:
        The groups (union-find over rows) and the number of pairwise comparisons made.
    """
    hits = cands.hits
    stage, best, ids, fetched = cands.stage, cands.best, cands.ids, cands.fetched
    g = Groups(len(hits), lambda i: (not vouched(hits[i], fetched[i]), stage[i], best[i], ids[i]))
    w = cfg.weights  # a criterion weighted 0 is off
    long_urls = _url_duplicates(hits, g) if w.url > 0 else []
    comparisons = title_join(hits, cfg.title_jaccard, g) if w.title > 0 else 0
    comparisons += jaccard_join(long_urls, cfg.url_similarity, g, "url")
    # Identical signatures first (a pile of copies costs one step each), then the table search over distinct ones.
    sigs = _signatures(hits)
    max_bits = math.floor((1.0 - cfg.near_duplicate) * 64 + 1e-9)
    n = len(sigs)
    first = dict(zip(reversed(sigs), range(n - 1, -1, -1), strict=True))  # signature → its first row
    if len(first) != n:
        for i in compress(range(n), map(ne, map(first.__getitem__, sigs), range(n))):
            if sigs[i] is not None:
                j = first[sigs[i]]
                ta, tb = hits[j].text, hits[i].text
                why = "content" if ta == tb or _norm_text(ta) == _norm_text(tb) else "near"
                if getattr(w, why) > 0:
                    g.union(j, i, why)
    first.pop(None, None)
    signed = n - sigs.count(None)
    uniq = [s for s in first if s is not None] if w.near > 0 else []
    pairs, near_cmp = near_pairs(np.array(uniq, dtype=np.uint64), max_bits)
    # In ascending signature order, as the unique signatures were once sorted.
    for a, b in sorted((min(uniq[pa], uniq[pb]), max(uniq[pa], uniq[pb])) for pa, pb in pairs):
        g.union(first[a], first[b], "near")
    return g, comparisons + near_cmp + signed - len(uniq)


class Deduplicator:
    """Stage: merge duplicate candidates (see the module docstring for the criteria)."""

    def __init__(self, cfg: DedupConfig, on_merge: Callable[[list[str]], None] | None = None) -> None:
        """Keep the thresholds; ``on_merge(criteria)`` gets the criterion of each merged candidate (in row order).

        It is called once per call that merged anything, so counting costs no call per merge.
        """
        self.cfg = cfg
        self.on_merge = on_merge

    def __call__(self, cands: Candidates, run: FusionRun) -> Candidates:
        """Merge every duplicate row into its group's representative row."""
        groups, _ = find_duplicates(cands, self.cfg)
        why = groups.why
        if not why:
            return cands
        members = sorted(why)  # rows that lost to a root, in row order
        if self.on_merge is not None:
            self.on_merge([why[i] for i in members])
        root = list(range(len(cands)))
        for i, r in zip(members, groups.roots(members), strict=True):
            root[i] = r
        _merge(cands, root, members)
        return cands


def _merge(cands: Candidates, root: list[int], members: list[int]) -> None:
    """Fold each member row into its root, one by one in row order, then drop the members and renumber."""
    n = len(cands)
    ids, stage, best = cands.ids, cands.stage, cands.best
    touched = {*members, *(root[i] for i in members)}
    member_of = [touched.intersection(rows) for rows in cands.rows]  # lane → touched rows it holds
    orders: dict[int, list[int]] = {}
    merged: dict[int, list[str]] = {}
    for i in members:
        r = root[i]
        order = orders.get(r)
        if order is None:
            order = orders[r] = [lane for lane, held in enumerate(member_of) if r in held]
        order += [lane for lane, held in enumerate(member_of) if i in held and lane not in order]
        merged.setdefault(r, []).append(ids[i])
        if stage[i] < stage[r]:
            stage[r] = stage[i]
        if best[i] < best[r]:
            best[r] = best[i]
    gone = set(members)
    keep = [i for i in range(n) if i not in gone]
    new = dict(zip(keep, range(len(keep)), strict=True))
    to = [new[r] for r in root]
    cands.ids = [ids[i] for i in keep]
    cands.hits = [cands.hits[i] for i in keep]
    cands.fetched = [cands.fetched[i] for i in keep]
    cands.stage = [stage[i] for i in keep]
    cands.best = best = [best[i] for i in keep]
    cands.merged = {new[r]: m for r, m in merged.items()}
    cands.lane_order = {new[r]: o for r, o in orders.items()}
    for lane, rows in enumerate(cands.rows):
        mapped = [to[j] for j in rows]
        if not member_of[lane] & gone:  # no copy in this lane: ranks stay
            cands.rows[lane] = mapped
            continue
        if len(set(mapped)) == len(mapped):
            cands.rows[lane] = mapped
            continue
        # Copies in one lane: the first (best-ranked) occurrence keeps its place and native score, the ranks
        # after it close up; the normalised score is the best of the copies' (compared in rank order).
        native, norm = cands.native[lane], cands.norm[lane]
        size = len(mapped)
        first = dict(zip(reversed(mapped), range(size - 1, -1, -1), strict=True))  # row → its first position
        kept = sorted(first.values())
        out_rows = [mapped[p] for p in kept]
        cands.rows[lane], cands.native[lane] = out_rows, [native[p] for p in kept]
        if norm:
            out_norm = [norm[p] for p in kept]
            at = dict(zip(out_rows, range(len(out_rows)), strict=True))
            for p in compress(range(size), map(ne, map(first.__getitem__, mapped), range(size))):
                q = at[mapped[p]]
                if norm[p] > out_norm[q]:
                    out_norm[q] = norm[p]
            cands.norm[lane] = out_norm
        # Ranks only move up where they close up, after the first copy; every rank before it is the lane's own,
        # which the row's best rank already counts.
        start = next(k for k, p in enumerate(kept) if k != p) if kept[-1] != len(kept) - 1 else len(kept)
        for r, j in enumerate(out_rows[start:], start + 1):
            if r < best[j]:
                best[j] = r
