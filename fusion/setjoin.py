"""Set-similarity joins for deduplication: union-find groups and the prefix-filtered Jaccard join.

Prefix filtering (exact): with the tokens of every set in one fixed global order, two sets can reach Jaccard
``t`` only if they share one of their first ``|x| - ⌈t·|x|⌉ + 1`` tokens, so each set is compared only with the
earlier sets of its block that share such a token. The join is sequential: a set that merged is not indexed,
so a pile of copies costs one comparison each.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from itertools import chain
from operator import itemgetter

__all__ = ["Groups", "jaccard_join", "prefix_join"]

_SMALL = 256
"""Up to this many sets, the prefix order is the tokens' given (sorted) order, with no frequency count."""


class Groups:
    """Union-find over candidate indices; each group's root is its member with the smallest ``key``."""

    def __init__(
        self,
        n: int,
        key: Callable[[int], tuple[int, int, str]] | None = None,
        *,
        columns: tuple[list[int], list[int], list[str]] | None = None,
    ) -> None:
        """``n`` singleton groups; ``key(i)`` orders members (the smallest becomes the root), else the index.

        ``columns=(stage, best, ids)`` orders them by ``(stage[i], best[i], ids[i])`` (a ``key`` given as data, so
        the compiled loops of :mod:`fusion._kernel` can unite rows without calling back into Python).
        """
        self.parent = list(range(n))
        self.why: dict[int, str] = {}
        self.columns = columns
        if key is None and columns is not None:
            stage, best, ids = columns
            key = lambda i: (stage[i], best[i], ids[i])  # noqa: E731
        self.key = key

    def find(self, i: int) -> int:
        """The root of ``i``'s group (with path halving)."""
        p = self.parent
        while p[i] != i:
            p[i] = p[p[i]]
            i = p[i]
        return i

    def roots(self, rows: Sequence[int]) -> list[int]:
        """The root of each of ``rows`` (one call for many: :meth:`find` inlined, with the same path halving)."""
        p = self.parent
        out = []
        for i in rows:
            while p[i] != i:
                p[i] = p[p[i]]
                i = p[i]
            out.append(i)
        return out

    def union(self, a: int, b: int, why: str) -> None:
        """Merge the groups of ``a`` and ``b``; the root that loses records ``why`` in :attr:`why`."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        key = self.key
        if (key(rb) < key(ra)) if key is not None else rb < ra:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.why[rb] = why


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
    for (i, block, toks), prefix in zip(items, prefixes, strict=True):
        probes = [(block, tok) for tok in prefix if (block, tok) in shared]
        if not probes:
            continue
        s = frozenset(toks)
        seen: set[int] = set()
        merged = False
        for key in probes:
            for j, other in index.get(key, ()):
                if j in seen or g.find(j) == g.find(i):
                    continue
                seen.add(j)
                comparisons += 1
                if len(s & other) >= t * len(s | other):
                    g.union(i, j, why)
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
