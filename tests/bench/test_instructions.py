"""Tests for the instruction-count bench: its workloads, the callgrind output parsing and its errors."""

from __future__ import annotations

import argparse
import shutil

import pytest

from bench import instructions
from bench.instructions import WORKLOADS, parse_collected, workload
from fabric.core.errors import QueryError


def args(**kw: object) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    instructions.add_arguments(parser)
    ns = parser.parse_args([])
    for key, value in kw.items():
        setattr(ns, key, value)
    return ns


class TestParse:
    def test_reads_the_total(self) -> None:
        """The total instruction count callgrind prints at exit is read."""
        out = "==12== Events    : Ir\n==12== Collected : 1173903682\n==12==\n==12== I   refs:      1,173,903,682\n"
        assert parse_collected(out) == 1_173_903_682

    def test_no_total_is_an_error(self) -> None:
        """Output without a total (callgrind did not run) is refused, not read as zero."""
        with pytest.raises(ValueError, match="Collected"):
            parse_collected("python: command not found")


class TestWorkloads:
    @pytest.mark.parametrize("name", WORKLOADS)
    def test_each_workload_runs(self, name: str) -> None:
        """Every workload runs in-process with and without operations (what each child process does)."""
        workload(name, 0, 2)
        workload(name, 2, 2)

    def test_unknown_workload(self) -> None:
        """An unknown workload name is refused."""
        with pytest.raises(ValueError, match="unknown workload"):
            workload("nope", 1)


class TestRun:
    def test_missing_valgrind_is_a_clear_error(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without valgrind the bench says what to install instead of failing in a subprocess."""
        monkeypatch.setattr(instructions.shutil, "which", lambda _: None)
        with pytest.raises(QueryError, match="valgrind not found"):
            instructions.run(args())

    def test_bad_counts(self) -> None:
        """Non-positive --calls or --queries are refused."""
        with pytest.raises(QueryError, match="positive"):
            instructions.run(args(calls=0))

    @pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
    def test_counts_under_callgrind(self) -> None:
        """Under callgrind, fusion costs more instructions than the plain-RRF floor on the same hits."""
        out = instructions.run(args(calls=5, workloads=["fusion_6x50", "floor_6x50"]))
        assert out["floor_6x50_instructions"] > 0
        assert out["fusion_6x50_instructions"] > out["floor_6x50_instructions"]
        assert out["ratio_to_floor_6x50"] > 1.0
        assert out["operations"] == {"fusion_6x50": 5, "floor_6x50": 50}
