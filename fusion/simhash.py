"""64-bit SimHash of a text, vectorised with numpy over many texts at once.

Features are the word bigrams of the case-folded text (the single word for a one-word text); each word is
hashed with 8-byte BLAKE2b, a bigram ``(a, b)`` as ``splitmix64(a · φ ^ b)`` (φ the 64-bit golden ratio).
Bit ``i`` of the SimHash is set when more than half of the features have bit ``i`` set. Two texts whose
word sequences mostly agree get SimHashes a few bits apart; ``similarity = 1 - hamming / 64``.

Deterministic across processes (no ``hash()``, which Python salts per process). Computed once per
document at ingest and stored in :attr:`fabric.models.Hit.simhash`; dedup computes missing ones in one batch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from hashlib import blake2b

import numpy as np
from numpy.typing import NDArray

__all__ = ["hamming", "simhash64", "simhash_many"]

_WORD = re.compile(r"\w+")
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _splitmix(h: NDArray[np.uint64]) -> NDArray[np.uint64]:
    h = h ^ (h >> np.uint64(30))
    h = h * _MIX1
    h = h ^ (h >> np.uint64(27))
    h = h * _MIX2
    out: NDArray[np.uint64] = h ^ (h >> np.uint64(31))
    return out


def simhash_many(texts: Sequence[str]) -> list[int | None]:
    """SimHash every text (None for a text without words)."""
    words_per_text = [_WORD.findall(t.casefold()) for t in texts]
    flat = [w for ws in words_per_text for w in ws]
    out: list[int | None] = [None] * len(texts)
    if not flat:
        return out
    vocab = {w: int.from_bytes(blake2b(w.encode(), digest_size=8).digest(), "little") for w in set(flat)}
    h = np.fromiter(map(vocab.__getitem__, flat), dtype=np.uint64, count=len(flat))
    lengths = np.fromiter(map(len, words_per_text), dtype=np.int64, count=len(texts))
    last = np.zeros(len(flat), dtype=bool)
    last[np.cumsum(lengths)[lengths > 0] - 1] = True
    # Position i yields the bigram (i, i+1) unless it is its text's last word; a one-word text keeps its word.
    nxt = np.append(h[1:], np.uint64(0))
    feats = np.where(last, _splitmix(h), _splitmix((h * _GOLDEN) ^ nxt))
    keep = ~last | np.repeat(lengths == 1, lengths)
    feats = feats[keep]
    nfeat = np.where(lengths > 1, lengths - 1, lengths)
    has = np.flatnonzero(nfeat)
    starts = (np.cumsum(nfeat) - nfeat)[has]
    sig = np.zeros(len(has), dtype=np.uint64)
    for b in range(64):
        ones = np.add.reduceat(((feats >> np.uint64(b)) & np.uint64(1)).astype(np.int32), starts)
        sig |= (2 * ones > nfeat[has]).astype(np.uint64) << np.uint64(b)
    for i, value in zip(has.tolist(), sig.tolist(), strict=True):
        out[i] = int(value)
    return out


def simhash64(text: str) -> int | None:
    """SimHash of one text (None when it has no words)."""
    return simhash_many([text])[0]


def hamming(a: int, b: int) -> int:
    """Number of differing bits."""
    return (a ^ b).bit_count()
