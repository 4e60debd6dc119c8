"""``fabric bench encoder`` smoke test: a tiny interleaved run over real SciFact texts and the real runtimes."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench import encoder
from fabric.core.errors import QueryError

SCIFACT = Path("/work/shared/datasets/scifact")


@pytest.mark.skipif(not SCIFACT.exists(), reason="needs ../shared/datasets/scifact")
def test_tiny_run_reports_every_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each runtime gets latency, throughput and agreement figures; torch is its own reference."""
    monkeypatch.setenv("FABRIC_CACHE_DIR", str(tmp_path))
    args = argparse.Namespace(dataset=str(SCIFACT), queries=4, docs=12, runtimes="torch,onnx-int8")
    out = encoder.run(args)
    assert (out["queries"], out["docs"]) == (4, 12)
    torch, int8 = out["runtimes"]["torch"], out["runtimes"]["onnx-int8"]
    assert torch["ratio_vs_torch"] == 1.0
    assert torch["cos_min"] == pytest.approx(1.0, abs=1e-5)
    assert torch["top10_overlap_both"] == 1.0
    assert 0.9 < int8["cos_min"] < 1.0
    assert int8["docs_per_s"] > 0
    assert {"p50_ms", "p95_ms", "docs_s", "top10_overlap_queries_only"} <= set(int8)
    assert len(out["loadavg_1m"]) == 2


def test_no_runtime_is_a_query_error() -> None:
    """An empty runtime list is refused with a clear error."""
    args = argparse.Namespace(dataset=str(SCIFACT), queries=4, docs=12, runtimes=" , ")
    with pytest.raises(QueryError, match="runtimes"):
        encoder.run(args)
