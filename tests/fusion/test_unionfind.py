"""Tests for fusion.unionfind: roots by key, the merge criteria, and roots() against find()."""

from __future__ import annotations

import random

from fusion import unionfind
from fusion.unionfind import Groups


class TestGroups:
    def test_public_api(self) -> None:
        """The module exports the groups."""
        assert unionfind.__all__ == ["Groups"]

    def test_root_is_smallest_key(self) -> None:
        """The member with the smallest key becomes the root; the loser records the criterion."""
        ids = ["c", "a", "b"]
        g = Groups(3, key=lambda i: (0, 1, ids[i]))
        g.union(0, 2, "url")
        g.union(2, 1, "near")
        assert g.find(0) == g.find(2) == 1
        assert g.why == {0: "url", 2: "near"}

    def test_without_key_the_index_decides(self) -> None:
        """Without a key the smaller index wins; a union inside one group records nothing."""
        g = Groups(4)
        g.union(3, 1, "title")
        g.union(1, 3, "near")
        assert g.find(3) == 1
        assert g.why == {3: "title"}

    def test_roots_same_as_find(self) -> None:
        """roots(rows) gives find(row) for each row, in order, and halves paths as find does."""
        rng = random.Random(3)
        for _ in range(50):
            n = rng.randint(1, 40)
            a, b = Groups(n), Groups(n)
            for _ in range(rng.randint(0, 2 * n)):
                x, y = rng.randrange(n), rng.randrange(n)
                a.union(x, y, "near")
                b.union(x, y, "near")
            rows = [rng.randrange(n) for _ in range(rng.randint(0, n))]
            assert a.roots(rows) == [b.find(i) for i in rows]
            assert a.parent == b.parent

    def test_roots_of_nothing(self) -> None:
        """No rows, no roots."""
        assert Groups(3).roots([]) == []
