"""numpy's BLAS on one thread, for processes the CLI owns.

The engine's numerical work runs on many threads at once (a lane call each, the ONNX encoder with its own pool),
so a BLAS that spreads one matrix-vector product over every core makes concurrent searches wait on each other's
spinning threads (at 5K rows, 20 ms instead of 0.1 ms under load). Single-threaded, BLAS is the fastest way to
score a flat vector store: at 50K × 384 rows, 3.5 ms per query against 8.9-10.3 ms for ``np.einsum`` (measured on
the 2-core machine, quiet). :func:`limit_blas_threads` sets one thread for numpy's BLAS (and any other BLAS loaded
by then), so ``fabric`` calls it at start-up; a host application embedding the engine keeps its own setting unless
it calls it too. The flat vector index asks :func:`blas_single_threaded` which product to use.
"""

from __future__ import annotations

__all__ = ["blas_single_threaded", "limit_blas_threads"]

_limited = False


def limit_blas_threads() -> None:
    """Run numpy's BLAS on one thread in this process (numpy is imported first: the limit reaches only the BLAS
    libraries already loaded)."""
    global _limited
    import numpy  # noqa: F401  (loads numpy's BLAS)
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")
    _limited = True


def blas_single_threaded() -> bool:
    """Whether :func:`limit_blas_threads` put numpy's BLAS on one thread in this process.

    A flag, not a look at the loaded libraries: a BLAS loaded later by another package (scipy brings its own) runs
    as it likes, and does not change which product is fastest for numpy's arrays."""
    return _limited
