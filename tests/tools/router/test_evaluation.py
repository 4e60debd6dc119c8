"""Tests for the router passes and report: the real engine over fake lanes and a tiny judged dataset."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric.core.models import Hit, LaneKind
from fabric.eval.dataset import Dataset, EvalQuery
from fabric.query.engine import Engine
from lanes.fake import FakeLane
from tests.fabric.query.router.test_planner import settings_for
from tests.support.settings import quiet_logs  # noqa: F401
from tools.router.evaluation import default_passes, oracle_runs, router_report, run_routes, strategy_scores

LANES = {"vector": {"kind": LaneKind.VECTOR}, "graph": {"kind": LaneKind.GRAPH}}


def hits(prefix: str, scores: list[float]) -> list[Hit]:
    return [
        Hit(id=f"{prefix}{i}", doc_id=f"{prefix}{i}", rank=i + 1, score=s, title=f"t{i}", text=f"text {prefix} {i}")
        for i, s in enumerate(scores)
    ]


PEAKED = [0.9, 0.4, 0.38, 0.37, 0.36, 0.35, 0.34, 0.33, 0.32, 0.31]


def dataset(tmp_path: Path) -> Dataset:
    queries = (
        EvalQuery(id="q1", text="vitamin d levels"),
        EvalQuery(id="q2", text="connection between insulin and glucagon"),
    )
    qrels = {"q1": {"v0": 2}, "q2": {"g0": 2, "v0": 1}}
    return Dataset(
        root=tmp_path, name="tiny", split="test", corpus=tmp_path, corpus_format="beir", queries=queries, qrels=qrels
    )


async def test_passes_and_report(tmp_path: Path) -> None:
    """Every router gets nDCG@10, lane calls, p50/p95 and ratios to all-lanes; the oracle replays the best plan.

    Strategies on the vector lane alone (as in test_planner) and no lane they leave out (it would run under every
    strategy), so lane counts are easy to read.
    """
    fakes = {
        "vector": FakeLane(name="vector", kind=LaneKind.VECTOR, hits=hits("v", PEAKED)),
        "graph": FakeLane(name="graph", kind=LaneKind.GRAPH, hits=hits("g", [3.0, 2.0])),
    }
    ds = dataset(tmp_path)
    async with Engine(settings_for(tmp_path, names=tuple(LANES)), lanes=fakes) as engine:
        passes = await run_routes(engine, ds, default_passes(False), lanes=list(LANES))
    assert set(passes) == {"all", "dense", "temporal", "graph", "heuristic"}
    assert passes["heuristic"]["q1"].strategy == "dense"  # peaked probe
    assert passes["heuristic"]["q2"].strategy == "graph"  # relational phrase
    assert passes["all"]["q1"].lane_calls == 2
    assert passes["dense"]["q1"].lane_calls == 1

    scores = strategy_scores(ds, passes)
    assert scores["q1"]["dense"] == pytest.approx(1.0)
    assert scores["q2"]["graph"] > scores["q2"]["dense"]
    oracle = oracle_runs(passes, scores, 0.05)
    assert (oracle["q1"].strategy, oracle["q2"].strategy) == ("dense", "graph")

    report = router_report(ds, passes, delta=0.05)
    rows = report["routers"]
    assert list(rows) == ["all", "dense", "heuristic", "oracle"]
    assert rows["all"]["ndcg_ratio_vs_all"] == 1.0
    assert rows["dense"]["lanes_ratio_vs_all"] == pytest.approx(1 / 2, abs=1e-4)
    assert rows["heuristic"]["lanes_per_query"] == 1.5  # q1: the probe reused; q2: vector + graph
    assert rows["oracle"]["ndcg_at_10"] >= rows["dense"]["ndcg_at_10"]
    assert rows["heuristic"]["strategies"] == {"dense": 1, "graph": 1}
    assert {"p50_ms", "p95_ms", "p95_ratio_vs_all"} <= set(rows["heuristic"])
    assert report["label_ablation"]["0.05"] == {"dense": 1, "temporal": 0, "graph": 1}
    assert set(report["strategies"]) == {"dense", "temporal", "graph"}


def test_default_passes() -> None:
    """The classifier pass only when a classifier is loaded."""
    assert [p.name for p in default_passes(True)][-2:] == ["heuristic", "classifier"]
    assert "classifier" not in [p.name for p in default_passes(False)]
