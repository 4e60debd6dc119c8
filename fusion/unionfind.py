"""Union-find over candidate rows, for deduplication: each group's root is its member with the smallest key.

Unions record the criterion of each merge on the row that stopped being a root (:attr:`Groups.why`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["Groups"]


class Groups:
    """Union-find over candidate indices; each group's root is its member with the smallest ``key``."""

    def __init__(self, n: int, key: Callable[[int], tuple[bool, int, int, str]] | None = None) -> None:
        """``n`` singleton groups; ``key(i)`` orders members (the smallest becomes the root), else the index."""
        self.parent = list(range(n))
        self.why: dict[int, str] = {}
        """Row → the criterion that merged it into another row's group (only rows that lost a union)."""
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
