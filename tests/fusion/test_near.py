"""Tests for fusion.near: the exact near-duplicate search over SimHash signatures."""

from __future__ import annotations

import random

import numpy as np
import pytest

from fusion import near
from fusion.near import ALL_PAIRS, SMALL, near_pairs


def test_public_api() -> None:
    """The module exports the search and its small-input bound."""
    assert sorted(near.__all__) == ["ALL_PAIRS", "SMALL", "near_pairs"]


class TestNearSearch:
    @pytest.mark.parametrize(
        ("n", "max_bits"), [(40, 6), (40, 1), (96, 9), (150, 6), (150, 3), (150, 8), (400, 6), (400, 7)]
    )
    def test_finds_exactly_the_close_pairs(self, n: int, max_bits: int) -> None:
        """All pairs (a few signatures), bit bands (a query's candidates) and byte-pair tables (many) each return
        exactly the pairs within max_bits, in order."""
        rng = random.Random(n + max_bits)
        sigs = [rng.getrandbits(64) for _ in range(n - n // 5)]
        for s in sigs[: n // 5]:  # near copies, 1 to max_bits + 2 bits away
            for b in rng.sample(range(64), rng.randint(1, max_bits + 2)):
                s ^= 1 << b
            sigs.append(s)
        pairs, _ = near_pairs(np.array(sigs, dtype=np.uint64), max_bits)
        brute = [(i, j) for i in range(n) for j in range(i + 1, n) if (sigs[i] ^ sigs[j]).bit_count() <= max_bits]
        assert pairs == brute
        assert any(p for p in brute)
        assert (n <= SMALL) == (n <= 150)
        assert (n <= ALL_PAIRS) == (n <= 96)

    def test_fewer_than_two_signatures(self) -> None:
        """No pairs and no comparisons for one signature."""
        assert near_pairs(np.array([5], dtype=np.uint64), 6) == ([], 0)
