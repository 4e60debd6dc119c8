"""64-bit SimHash of a text, vectorised with numpy over many texts at once.

Words are the whitespace-separated pieces of the case-folded text with ASCII punctuation turned into spaces
(the first 65,535); features are the word bigrams (the single word for a one-word text); each word is
hashed by chaining splitmix64 over its first 32 UTF-8 bytes (four little-endian 64-bit lanes, vectorised over
the vocabulary), a bigram ``(a, b)`` as ``splitmix64(a · φ ^ b)`` (φ the 64-bit golden ratio).
Bit ``i`` of the SimHash is set when more than half of the features have bit ``i`` set. Two texts whose
word sequences mostly agree get SimHashes a few bits apart; ``similarity = 1 - hamming / 64``.

Deterministic across processes (no ``hash()``, which Python salts per process). Computed once per
document at ingest and stored in :attr:`fabric.core.models.Hit.simhash`; dedup computes missing ones in one batch.
"""

from __future__ import annotations

import string
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

__all__ = ["hamming", "simhash64", "simhash_many"]

_SPACES = str.maketrans(dict.fromkeys(string.punctuation, " "))
_MAX_WORDS = 65535
_NIBBLE = np.array([sum(((v >> i) & 1) << (16 * i) for i in range(4)) for v in range(16)], dtype=np.uint64)
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
    words_per_text = [t.casefold().translate(_SPACES).split()[:_MAX_WORDS] for t in texts]
    flat = [w for ws in words_per_text for w in ws]
    out: list[int | None] = [None] * len(texts)
    if not flat:
        return out
    words = list(set(flat))
    # Each word: its first 32 UTF-8 bytes as four little-endian uint64 lanes, chained through splitmix64.
    lanes = np.array([w.encode() for w in words], dtype="S32").view("<u8").reshape(len(words), 4)
    wh = _splitmix(lanes[:, 0] ^ _GOLDEN)
    for j in range(1, 4):
        wh = _splitmix(wh ^ lanes[:, j])
    vocab = dict(zip(words, wh.tolist(), strict=True))
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
    # Per-bit counts, four bits at a time: a nibble is spread into four 16-bit lanes of a uint64, so one
    # reduceat adds four bit counters per text (a text has < 2**16 features, see _MAX_WORDS).
    counts = np.empty((len(has), 64), dtype=np.int64)
    for k in range(16):
        spread = _NIBBLE[((feats >> np.uint64(4 * k)) & np.uint64(15)).astype(np.intp)]
        counts[:, 4 * k : 4 * k + 4] = np.add.reduceat(spread, starts).view("<u2").reshape(len(has), 4)
    signs = (2 * counts > nfeat[has][:, None]).astype(np.uint8)
    sig = np.packbits(signs, axis=1, bitorder="little").view("<u8").ravel()
    for i, value in zip(has.tolist(), sig.tolist(), strict=True):
        out[i] = int(value)
    return out


def simhash64(text: str) -> int | None:
    """SimHash of one text (None when it has no words)."""
    return simhash_many([text])[0]


def hamming(a: int, b: int) -> int:
    """Number of differing bits."""
    return (a ^ b).bit_count()
