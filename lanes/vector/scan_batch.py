"""Shared scans of the flat matrix: concurrent searches over the same rows read it once (issue 14).

An unfiltered search scores every row of its snapshot, ``rows @ q``. The scan is memory-bound (50K × 384 floats
are 77 MB) and under load several searches scan the same matrix at the same time: at 70 requests per second on
the 50K home it was the largest share of ``fabric serve``'s CPU (24 % of py-spy's samples, beside the query
encoder's 24 %). :class:`ScanBatcher` groups them, as the query encoder's batcher groups encodings (group
commit): a search finding no scan in progress scans at once; searches arriving while one runs form the next
batch, which reads the matrix block by block (:data:`BLOCK` rows, 1.5 MB, so a block stays in cache) and
multiplies each block by every query of the batch before reading the next. A lone search never waits for company.

Each query's scores are bit-identical to its own matrix–vector product: a row's score is its dot product with the
query, computed alike whatever block it is in (tested), so an answer does not depend on what ran beside it.
"""

from __future__ import annotations

import threading

import numpy as np

from fabric.blas import blas_single_threaded

__all__ = ["BLOCK", "ScanBatcher", "scores"]

BLOCK = 1024
"""Rows per block of a batched scan (1,024 × 384 float32 = 1.5 MB)."""


def scores(rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``rows · q`` on one thread: BLAS's gemv where :mod:`fabric.blas` limited BLAS to one thread (the CLI's
    processes), else ``einsum`` (why: that module's docstring)."""
    out: np.ndarray = rows @ q if blas_single_threaded() else np.einsum("ij,j->i", rows, q)
    return out


def _blocked(rows: np.ndarray, queries: list[np.ndarray]) -> list[np.ndarray]:
    """Each query's :func:`scores` over ``rows``, reading ``rows`` once, block by block."""
    out = [np.empty(rows.shape[0], dtype=np.float32) for _ in queries]
    for start in range(0, rows.shape[0], BLOCK):
        block = rows[start : start + BLOCK]
        for dest, q in zip(out, queries, strict=True):
            dest[start : start + BLOCK] = scores(block, q)
    return out


class _Batch:
    """Queries waiting for one scan of the same rows."""

    __slots__ = ("done", "error", "key", "queries", "results")

    def __init__(self, key: tuple[int, tuple[int, ...]]) -> None:
        self.key = key
        self.queries: list[np.ndarray] = []
        self.results: list[np.ndarray] = []
        self.error: BaseException | None = None
        self.done = threading.Event()


class ScanBatcher:
    """Groups concurrent full scans of the same rows (see the module docstring); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards _next
        self._scan = threading.Lock()  # held while a batch scans
        self._next: _Batch | None = None
        self.scans = 0
        """Scans made (batched or alone)."""
        self.queries = 0
        """Queries they scored (``queries / scans`` is the mean batch size)."""

    def scores(self, rows: np.ndarray, q: np.ndarray) -> np.ndarray:
        """``rows · q``, computed together with the searches of the same ``rows`` arriving meanwhile."""
        key = (int(rows.__array_interface__["data"][0]), rows.shape)  # the same rows of the same live buffer
        leader = False
        with self._lock:
            batch = self._next
            if batch is None:
                batch = self._next = _Batch(key)
                leader = True
            elif batch.key != key:  # a batch over other rows is forming (a write landed): scan alone
                batch = None
            if batch is not None:
                batch.queries.append(q)
                slot = len(batch.queries) - 1
        if batch is None:
            return self._count(1, scores(rows, q))
        if not leader:  # the batch's leader scans for us
            batch.done.wait()
            if batch.error is not None:
                raise batch.error
            return batch.results[slot]
        with self._scan:  # wait for the scan in progress; others join the batch meanwhile
            with self._lock:
                if self._next is batch:
                    self._next = None
                queries = list(batch.queries)
            try:
                batch.results = [scores(rows, q)] if len(queries) == 1 else _blocked(rows, queries)
            except BaseException as exc:
                batch.error = exc
                raise
            finally:
                batch.done.set()
        return self._count(len(queries), batch.results[0])

    def _count(self, queries: int, result: np.ndarray) -> np.ndarray:
        with self._lock:
            self.scans += 1
            self.queries += queries
        return result
