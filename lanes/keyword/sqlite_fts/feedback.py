"""Pseudo-relevance feedback for the keyword lane: RM3 over the in-memory copy of the postings.

RM3 (Abdul-Jaleel et al., TREC 2004; Anserini's ``-rm3``) reads the first ranking's best ``docs`` rows as if they
were relevant and adds the words they share to the query:

1. RM1, the relevance model: ``P(w|R) = sum over feedback rows d of P(d) * P(w|d)``, with ``P(w|d)`` the row's
   column-weighted frequency of ``w`` over its total, and ``P(d)`` the row's first-pass BM25 score normalised
   over the feedback rows;
2. the ``terms`` words of highest ``P(w|R)`` that may be added (:attr:`ForwardIndex.expandable`: no function word,
   no number, in at most half the rows), their weights renormalised to sum to 1;
3. the expanded query: the original terms with ``weight`` in all (each term ``weight / n``, repeats counted) and
   the added words with ``1 - weight`` in all; a row scores the weighted sum of the terms' BM25 contributions.

The classic collections (short abstracts, vocabulary mismatch between questions and documents) are where RM3 is
known to help; docs/ranking.md holds what it measured here. The expansion needs each row's terms, a forward copy of
the postings (:class:`ForwardIndex`), built with the snapshot only when the lane enables feedback.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lanes.keyword.sqlite_fts.stopwords import ENGLISH_STOPWORDS

__all__ = ["Feedback", "ForwardIndex", "expansion"]

_MAX_DF_SHARE = 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class Feedback:
    """How much of the first ranking feeds back (the lane's ``prf_docs``, ``prf_terms``, ``prf_weight``)."""

    docs: int = 10
    """Feedback rows: the first ranking's best."""
    terms: int = 10
    """Words added to the query."""
    weight: float = 0.5
    """The original query's share of the expanded one (RM3's ``originalQueryWeight``)."""

    def __post_init__(self) -> None:
        if self.docs < 1 or self.terms < 1 or not 0.0 <= self.weight <= 1.0:
            raise ValueError(f"feedback needs docs >= 1, terms >= 1 and 0 <= weight <= 1, got {self}")


@dataclass(frozen=True, slots=True)
class ForwardIndex:
    """Each row's terms: row ``r``'s term ids and frequencies are at ``bounds[r]:bounds[r + 1]``."""

    bounds: npt.NDArray[np.int64]
    term_ids: npt.NDArray[np.int32]
    freqs: npt.NDArray[np.float32]
    names: tuple[str, ...]
    """Term id → the FTS5 token (a key of the snapshot's postings)."""
    expandable: npt.NDArray[np.bool_]
    """Term id → whether feedback may add it: not a function word, not a number, in at most half the rows."""

    @classmethod
    def build(
        cls,
        rows: npt.NDArray[np.int64],
        owners: npt.NDArray[np.int64],
        freqs: npt.NDArray[np.float64],
        names: Sequence[str],
        doc_counts: npt.NDArray[np.int64],
        size: int,
        n_rows: int,
    ) -> ForwardIndex:
        """From the inverted postings (``rows``, their term ``owners`` and ``freqs``) of ``size`` rowids."""
        order = np.argsort(rows, kind="stable")
        bounds = np.searchsorted(rows[order], np.arange(size + 1)).astype(np.int64)
        words = np.array([not (n in ENGLISH_STOPWORDS or n.isdigit() or len(n) < 2) for n in names], dtype=bool)
        common = doc_counts > _MAX_DF_SHARE * max(n_rows, 1)
        return cls(
            bounds=bounds,
            term_ids=owners[order].astype(np.int32),
            freqs=freqs[order].astype(np.float32),
            names=tuple(names),
            expandable=words & ~common,
        )


def expansion(index: ForwardIndex, first: Sequence[tuple[int, float]], terms: int) -> list[tuple[str, float]]:
    """RM1's best ``terms`` expandable words over the feedback rows ``first`` (``(rowid, -bm25)``, best first),
    with weights summing to 1; empty when the rows hold no expandable word."""
    size = len(index.bounds) - 1
    rows = [(r, -s) for r, s in first if 0 <= r < size and -s > 0]
    total = sum(score for _, score in rows)
    if not rows or total <= 0:
        return []
    weights: dict[int, float] = {}
    for rowid, score in rows:
        lo, hi = int(index.bounds[rowid]), int(index.bounds[rowid + 1])
        ids, freq = index.term_ids[lo:hi], index.freqs[lo:hi]
        length = float(freq.sum())
        if length <= 0:
            continue
        keep = index.expandable[ids]
        for term_id, p in zip(ids[keep].tolist(), (freq[keep] / length * (score / total)).tolist(), strict=True):
            weights[term_id] = weights.get(term_id, 0.0) + p
    best = sorted(weights.items(), key=lambda item: (-item[1], item[0]))[:terms]
    mass = sum(w for _, w in best)
    return [(index.names[t], w / mass) for t, w in best] if mass > 0 else []
