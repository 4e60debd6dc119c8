"""The prefix-filtered Jaccard join for deduplication: unions sets of tokens at Jaccard ≥ ``t``.

Prefix filtering (exact): with the tokens of every set in one fixed global order, two sets can reach Jaccard
``t`` only if they share one of their first ``|x| - ⌈t·|x|⌉ + 1`` tokens, so each set is compared only with the
earlier sets of its block that share such a token. The join is sequential: a set that merged is not indexed,
so a pile of copies costs one comparison each.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from itertools import chain
from operator import itemgetter

from fusion.unionfind import Groups

__all__ = ["jaccard_join", "prefix_join"]

_SMALL = 256
"""Up to this many sets, the prefix order is the tokens' given (sorted) order, with no frequency count."""


def prefix_join(
    items: Sequence[tuple[int, str, Sequence[str]]],
    prefixes: Sequence[Sequence[str]],
    t: float,
    g: Groups,
    why: str,
    shared: set[tuple[str, str]] | None = None,
) -> int:
    """The sequential prefix-filtered join over ``items`` (``(row, block, sorted tokens)``, in processing order).

    Each item is compared with the earlier indexed items of its block that share a prefix token (and are not in
    its group yet); an item that merged is not indexed, so a pile of copies costs one comparison each. Only
    items sharing a (block, prefix token) with another item can be compared at all; the others would be indexed
    under keys no one probes, so callers may leave them out (same unions, same comparisons).
    """
    if shared is None:
        keys = Counter((block, tok) for (_, block, _), prefix in zip(items, prefixes, strict=True) for tok in prefix)
        shared = {k for k, c in keys.items() if c > 1}
    index: dict[tuple[str, str], list[tuple[int, frozenset[str]]]] = {}
    comparisons = 0
    find = g.find
    for (i, block, toks), prefix in zip(items, prefixes, strict=True):
        probes = [(block, tok) for tok in prefix if (block, tok) in shared]
        if not probes:
            continue
        s = frozenset(toks)
        size = len(s)
        seen: set[int] = set()
        merged = False
        root = find(i)
        for key in probes:
            for j, other in index.get(key, ()):
                if j in seen or find(j) == root:
                    continue
                seen.add(j)
                comparisons += 1
                common = len(s & other)
                if common >= t * (size + len(other) - common):  # |s ∪ other| = |s| + |other| - |s ∩ other|
                    g.union(i, j, why)
                    root = find(i)
                    merged = True
        if not merged:
            for key in probes:
                index.setdefault(key, []).append((i, s))
    return comparisons


def jaccard_join(items: list[tuple[int, str, Sequence[str]]], t: float, g: Groups, why: str) -> int:
    """Prefix-filtered set-similarity join within blocks; unions pairs with Jaccard ≥ t; returns comparisons.

    ``items`` are ``(row, block, tokens)`` with the tokens unique and sorted, in processing order.
    """
    if len(items) < 2:
        return 0
    # Any fixed global token order keeps prefix filtering exact; rarest-first keeps buckets small on big inputs.
    if len(items) > _SMALL:
        df = Counter(chain.from_iterable(s for _, _, s in items))
        rank = {tok: r for r, (tok, _) in enumerate(sorted(df.items(), key=itemgetter(1, 0)))}.__getitem__
        prefixes: list[Sequence[str]] = [
            sorted(toks, key=rank)[: len(toks) - math.ceil(t * len(toks)) + 1] for _, _, toks in items
        ]
    else:
        prefixes = [toks[: len(toks) - math.ceil(t * len(toks)) + 1] for _, _, toks in items]
    return prefix_join(items, prefixes, t, g, why)
