"""bench/mcp.py's measuring loop and summary, on scripted surfaces (the real run is ``python -m bench.mcp``)."""

from __future__ import annotations

from bench.mcp import _measure, _pct, _summary


async def test_measure_counts_same_ids_per_round_and_query() -> None:
    """Every surface is called once per query per round (plus a warm-up); mismatches against engine are counted."""
    calls: dict[str, int] = {"engine": 0, "same": 0, "other": 0}

    async def engine(q: str) -> list[str]:
        calls["engine"] += 1
        return [q, "x"]

    async def same(q: str) -> list[str]:
        calls["same"] += 1
        return [q, "x"]

    async def other(q: str) -> list[str]:
        calls["other"] += 1
        return ["x", q] if q == "b" else [q, "x"]

    measured = await _measure({"engine": engine, "same": same, "other": other}, ["a", "b"], repeats=3)
    assert calls == {"engine": 8, "same": 8, "other": 8}
    summary = _summary(measured)
    assert summary["engine"]["same_ids_same_order"] == "6/6"
    assert summary["same"]["same_ids_same_order"] == "6/6"
    assert summary["other"]["same_ids_same_order"] == "3/6"
    assert summary["engine"]["overhead_ms"] == 0.0
    assert summary["engine"]["ratio"] == 1.0
    assert all(s["calls"] == 6 for s in summary.values())


def test_pct_nearest_rank() -> None:
    assert _pct([5.0, 1.0, 3.0, 2.0, 4.0], 0.5) == 3.0
    assert _pct([float(i) for i in range(1, 101)], 0.95) == 95.0


def test_registered_and_validated() -> None:
    """``fabric bench mcp`` finds the module; bad counts are refused before anything is ingested."""
    import argparse

    import pytest

    import bench
    from bench import mcp as module
    from fabric.core.errors import QueryError

    assert "mcp" in bench.BENCHES
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    assert vars(parser.parse_args([])) == {"repeats": 5, "limit": 10}
    with pytest.raises(QueryError, match="--repeats and --limit"):
        module.run(parser.parse_args(["--repeats", "0"]))
