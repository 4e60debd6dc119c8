"""Tests of :mod:`fabric.embed.blas`: the CLI's one-thread BLAS and the check the flat vector index reads."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import fabric.embed.blas as mod
from fabric.cli import main


def _blas_threads() -> list[int]:
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


@pytest.fixture
def restored() -> Iterator[None]:
    """Put the process's BLAS threads back as they were (the test process is not the CLI's)."""
    before = max(_blas_threads())
    was = mod._limited
    yield
    threadpool_limits(limits=before, user_api="blas")
    mod._limited = was


def test_limit_sets_one_thread_and_the_check_follows(restored: None) -> None:
    """After the limit every BLAS pool runs one thread, the check says so, and products are unchanged."""
    m = np.random.default_rng(0).normal(size=(300, 16)).astype(np.float32)
    q = m[0]
    threaded = m @ q
    mod.limit_blas_threads()
    assert set(_blas_threads()) == {1}
    assert mod.blas_single_threaded()
    assert np.allclose(m @ q, threaded, atol=1e-5)
    assert np.allclose(np.einsum("ij,j->i", m, q), threaded, atol=1e-5)


def test_cli_limits_blas(restored: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Any fabric command runs with BLAS on one thread (the process is the CLI's)."""
    threadpool_limits(limits=2, user_api="blas")
    main(["--home", str(tmp_path / "missing"), "check"])  # its verdict does not matter here
    capsys.readouterr()
    assert set(_blas_threads()) == {1}
    assert mod.blas_single_threaded()
