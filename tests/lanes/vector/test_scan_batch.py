"""Shared scans: batched queries get their own matrix–vector product's scores, bit for bit, and a lone query
never waits."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import lanes.vector.scan_batch as mod
from lanes.vector.scan_batch import BLOCK, ScanBatcher, scores


@pytest.fixture(params=["gemv", "einsum"], autouse=True)
def product(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Both scoring paths: BLAS's gemv on one thread (as the CLI runs it) and einsum (a multi-threaded BLAS)."""
    monkeypatch.setattr(mod, "blas_single_threaded", lambda: request.param == "gemv")
    with threadpool_limits(limits=1 if request.param == "gemv" else None, user_api="blas"):
        yield


def _rows(n: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, 384)).astype(np.float32)


def _queries(k: int) -> list[np.ndarray]:
    return list(_rows(k, seed=7))


def test_blocked_scores_equal_each_product_bit_for_bit() -> None:
    """A batch read block by block (a last partial block included) gives each query's own product exactly."""
    rows = _rows(2 * BLOCK + 37)
    qs = _queries(5)
    for got, q in zip(mod._blocked(rows, qs), qs, strict=True):
        assert np.array_equal(got, scores(rows, q))


def _wait_for(cond: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_searches_arriving_during_a_scan_share_the_next() -> None:
    """While a scan runs, three searches of the same rows queue as one batch, scanned once for all three."""
    batcher, rows, qs = ScanBatcher(), _rows(BLOCK + 5), _queries(3)
    got: dict[int, np.ndarray] = {}
    batcher._scan.acquire()  # a scan in progress
    threads = [threading.Thread(target=lambda i=i: got.__setitem__(i, batcher.scores(rows, qs[i]))) for i in range(3)]
    threads[0].start()
    _wait_for(lambda: batcher._next is not None)  # the first is the next batch's leader, waiting for the scan
    for t in threads[1:]:
        t.start()
    _wait_for(lambda: batcher._next is not None and len(batcher._next.queries) == 3)
    batcher._scan.release()
    for t in threads:
        t.join()
    assert (batcher.scans, batcher.queries) == (1, 3)
    for i, q in enumerate(qs):
        assert np.array_equal(got[i], scores(rows, q))


def test_a_lone_search_scans_at_once() -> None:
    """No scan in progress: the search scans alone, without waiting, and leaves no batch behind."""
    batcher, rows, (q,) = ScanBatcher(), _rows(300), _queries(1)
    assert np.array_equal(batcher.scores(rows, q), scores(rows, q))
    assert (batcher.scans, batcher.queries, batcher._next) == (1, 1, None)


def test_other_rows_scan_alone_while_a_batch_forms() -> None:
    """A search of other rows (a snapshot after a write) does not join, nor wait for, a batch of older rows."""
    batcher, old, new, (q,) = ScanBatcher(), _rows(300), _rows(301), _queries(1)
    batcher._scan.acquire()
    waiting = threading.Thread(target=batcher.scores, args=(old, q))
    waiting.start()
    _wait_for(lambda: batcher._next is not None)
    assert np.array_equal(batcher.scores(new, q), scores(new, q))  # returns while the batch still waits
    batcher._scan.release()
    waiting.join()
    assert (batcher.scans, batcher.queries) == (2, 2)


def test_a_failed_scan_fails_every_query_of_its_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch's error reaches its followers as well as its leader; the batcher stays usable."""
    batcher, rows, qs = ScanBatcher(), _rows(64), _queries(2)
    errors: list[BaseException] = []

    def run(q: np.ndarray) -> None:
        try:
            batcher.scores(rows, q)
        except MemoryError as exc:
            errors.append(exc)

    def boom(rows: np.ndarray, queries: list[np.ndarray]) -> list[np.ndarray]:
        raise MemoryError("no room")

    monkeypatch.setattr(mod, "_blocked", boom)
    batcher._scan.acquire()
    threads = [threading.Thread(target=run, args=(q,)) for q in qs]
    threads[0].start()
    _wait_for(lambda: batcher._next is not None)
    threads[1].start()
    _wait_for(lambda: batcher._next is not None and len(batcher._next.queries) == 2)
    batcher._scan.release()
    for t in threads:
        t.join()
    assert len(errors) == 2
    assert np.array_equal(batcher.scores(rows, qs[0]), scores(rows, qs[0]))
