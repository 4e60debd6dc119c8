"""Near-duplicate search over 64-bit SimHash signatures: every pair within ``max_bits`` differing bits, exactly.

Pigeonhole tables instead of n² comparisons: cut the 64 bits into parts so that two signatures within ``d`` bits
must agree exactly on at least one part's key; pairs that agree on a key are candidates, checked with a popcount.

- ``d ≤ 6`` (similarity ≥ 0.9, the default): 28 tables keyed by a pair of the signature's 8 bytes (``d`` dirty
  bits leave ``8 - d ≥ 2`` clean bytes, so some pair of bytes is clean); 16-bit keys, ≈ n² / 2¹⁷ random
  collisions per table, so the search stays linear on thousands of candidates;
- ``d = 7``: 8 tables, one per byte (one clean byte);
- ``d ≥ 8``: ``d + 1`` bit bands (``d`` dirty bits leave one band clean), narrower and busier;
- up to :data:`SMALL` signatures (one query's candidates) and ``d ≤ 8``: ``d + 1`` bit bands as well, a quarter
  of the table entries of the byte pairs; their extra random collisions are a few hundred at most;
- up to :data:`ALL_PAIRS` signatures (a page or two of hits): every pair, as one ``n × n`` popcount matrix; below
  that size (at most 9,216 popcounts) four or six numpy calls cost less than the dozens the tables make.

Vectorised with numpy: per table, sort the keys and compare only neighbours with equal keys.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
from numpy.typing import NDArray

__all__ = ["ALL_PAIRS", "SMALL", "near_pairs"]

SMALL = 256
"""Up to this many signatures, the search uses ``max_bits + 1`` bit bands instead of byte-pair tables."""
ALL_PAIRS = 96
"""Up to this many signatures, the search compares every pair (measured crossover with the bands: ≈ 100)."""


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


def _band_constants(max_bits: int) -> tuple[NDArray[np.uint64], NDArray[np.uint64], np.uint64]:
    """Shifts, band tags and mask of ``max_bits + 1`` bit bands."""
    bands = max_bits + 1
    width = 64 // bands
    shifts = np.arange(0, width * bands, width, dtype=np.uint64)[:, None]
    tags = np.arange(bands, dtype=np.uint64)[:, None] << np.uint64(width)
    return shifts, tags, np.uint64((1 << width) - 1)


_BANDS = [_band_constants(b) for b in range(9)]
"""Band constants for ``max_bits`` 0–8 (tiny arrays, built once)."""


def near_pairs(sigs: NDArray[np.uint64], max_bits: int) -> tuple[list[tuple[int, int]], int]:
    """Index pairs ``(i, j)``, ``i < j``, of signatures within ``max_bits`` bits, sorted; and the comparisons made."""
    n = len(sigs)
    if n < 2:
        return [], 0
    if n <= ALL_PAIRS:
        close = np.bitwise_count(sigs[:, None] ^ sigs) <= max_bits
        if np.count_nonzero(close) == n:  # only the diagonal: no pair (the common case, four numpy calls)
            return [], n * (n - 1) // 2
        i, j = np.nonzero(close)
        upper = i < j
        return list(zip(i[upper].tolist(), j[upper].tolist(), strict=True)), n * (n - 1) // 2
    if n <= SMALL and 0 <= max_bits <= 8:
        # Few signatures: max_bits + 1 bands (7 narrow tables instead of 28; the extra random collisions are few in
        # absolute terms). Many: the byte-pair tables, whose 16-bit keys keep collisions rare.
        shifts, tags, mask = _BANDS[max_bits]
        keys = (((sigs >> shifts) & mask) | tags).ravel()
    else:
        keys = _table_keys(sigs, max_bits).ravel()
    order = np.argsort(keys, kind="stable")
    group, idx = keys[order], order % n
    firsts: list[NDArray[np.intp]] = []
    seconds: list[NDArray[np.intp]] = []
    for d in range(1, len(group)):  # entries d apart in sorted order are candidates when (table, key) agree
        at = np.flatnonzero(group[d:] == group[:-d])
        if not len(at):
            break
        firsts.append(idx[at])
        seconds.append(idx[at + d])
    if not firsts:
        return [], 0
    i, j = np.concatenate(firsts), np.concatenate(seconds)
    close = np.bitwise_count(sigs[i] ^ sigs[j]) <= max_bits
    found = set(zip(np.minimum(i, j)[close].tolist(), np.maximum(i, j)[close].tolist(), strict=True))
    return sorted(found), len(i)
