"""The title criterion of deduplication: titled rows of one domain whose title word sets reach Jaccard ``t``.

A title key (:func:`fusion.text.title_key`) lists its words once each in a fixed order, so a row's prefix tokens
(prefix filtering, :mod:`fusion.jaccard`) are the first words of its key. Only rows that share a (domain, prefix
word) with another row can match; one pass over the prefix words finds them (most rows share nothing and cost a
split and a dict probe per prefix word), and only they enter the join, by domain (in order of first appearance),
then row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from fusion.jaccard import prefix_join
from fusion.text import title_key
from fusion.unionfind import Groups

__all__ = ["title_join"]


def title_join(hits: Sequence[Any], t: float, g: Groups) -> int:
    """Union rows with the same non-empty domain and title word-set Jaccard ≥ ``t``; return the comparisons made."""
    rows = [i for i, h in enumerate(hits) if h.domain and h.title]
    if len(rows) < 2:
        return 0
    titled = hits if len(rows) == len(hits) else [hits[i] for i in rows]
    doms = [h.domain for h in titled]
    words = [(k if (k := h.title_key) is not None else title_key(h.title)).split() for h in titled]
    cut = {n: n - math.ceil(t * n) + 1 for n in set(map(len, words))}  # title size → prefix length
    first_row: dict[tuple[str, str], int] = {}  # (domain, prefix word) → the first row holding it
    shared: set[tuple[str, str]] = set()  # the keys held more than once
    picked: set[int] = set()  # rows holding a shared key
    for x, (d, w) in enumerate(zip(doms, words, strict=True)):
        for tok in w[: cut[len(w)]]:
            key = (d, tok)
            y = first_row.get(key)
            if y is None:
                first_row[key] = x
            else:
                shared.add(key)
                picked.add(y)
                picked.add(x)
    if not shared:  # no two rows share a (domain, prefix word): no title duplicates
        return 0
    order = {d: r for r, d in enumerate(dict.fromkeys(doms))}  # domain → its order of first appearance
    joined = sorted(picked)
    joined.sort(key=lambda y: order[doms[y]])  # stable: rows stay in order within a domain
    items = [(rows[y], doms[y], words[y]) for y in joined]
    return prefix_join(items, [words[y][: cut[len(words[y])]] for y in joined], t, g, "title", shared)
