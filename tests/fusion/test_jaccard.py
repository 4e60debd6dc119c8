"""Tests for fusion.jaccard: the prefix-filtered Jaccard join."""

from __future__ import annotations

import random

from fusion import jaccard
from fusion.jaccard import jaccard_join
from fusion.unionfind import Groups


def items(sets: list[set[str]], block: str = "b") -> list[tuple[int, str, list[str]]]:
    """Join items ``(row, block, sorted tokens)``."""
    return [(i, block, sorted(s)) for i, s in enumerate(sets)]


class TestJoin:
    def test_public_api(self) -> None:
        """The module exports both joins."""
        assert sorted(jaccard.__all__) == ["jaccard_join", "prefix_join"]

    def test_similar_sets_merge_dissimilar_stay(self) -> None:
        """Sets at Jaccard ≥ t join one group; others keep their own."""
        sets = [{"a", "b", "c", "d", "e"}, {"a", "b", "c", "d", "e", "f"}, {"x", "y", "z"}]
        g = Groups(3)
        jaccard_join(items(sets), 0.8, g, "title")
        assert g.find(1) == g.find(0) != g.find(2)
        assert g.why == {1: "title"}

    def test_blocks_are_separate(self) -> None:
        """Equal sets in different blocks are never compared."""
        g = Groups(2)
        assert jaccard_join([(0, "a", ["x", "y"]), (1, "b", ["x", "y"])], 0.8, g, "title") == 0
        assert g.find(0) != g.find(1)

    def test_matches_brute_force(self) -> None:
        """On random sets (both prefix orders), the groups equal those of comparing every pair in order."""
        rng = random.Random(1)
        vocab = [f"w{i}" for i in range(30)]
        for n in (60, 300):
            sets = [set(rng.sample(vocab, rng.randint(3, 6))) for _ in range(n)]
            g = Groups(n)
            jaccard_join(items(sets), 0.6, g, "title")
            ref = Groups(n)
            indexed: list[int] = []
            for i, s in enumerate(sets):  # the join's semantics, spelled out: compare with indexed earlier sets
                merged = False
                for j in indexed:
                    if ref.find(j) != ref.find(i) and len(s & sets[j]) >= 0.6 * len(s | sets[j]):
                        ref.union(i, j, "title")
                        merged = True
                if not merged:
                    indexed.append(i)
            assert [g.find(i) for i in range(n)] == [ref.find(i) for i in range(n)]
