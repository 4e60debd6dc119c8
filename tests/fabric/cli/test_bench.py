"""Tests for ``fabric bench NAME`` through ``fabric.cli.main``: the lazy import of the repository's ``bench/``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fabric.cli import main


def test_runs_a_benchmark_from_the_checkout(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Options after NAME go to the benchmark, and ``--json`` prints its figures as JSON."""
    # --scifact at an empty folder: the query-share part (a SciFact ingest) is skipped and says why.
    assert main(["bench", "fusion", "--repeat", "3", "--scifact", str(tmp_path), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["duplicates_merged_6x50"] > 0


def test_unknown_benchmark_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown name exits 2 and lists the available benchmarks."""
    assert main(["bench", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown benchmark 'nope'" in err
    assert "fusion" in err


def test_without_the_bench_folder_says_so(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """From an installed wheel (no importable ``bench``) the command explains where it runs, no traceback."""
    monkeypatch.setitem(sys.modules, "bench", None)
    assert main(["bench", "fusion", "--json"]) == 2
    assert "run `fabric bench` from a repository checkout" in capsys.readouterr().err
