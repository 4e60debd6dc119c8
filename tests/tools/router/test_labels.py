"""Tests for label files: rows from scores and probes, the round trip into training examples, bad lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabric.core.errors import ConfigError
from fabric.core.models import LaneKind, LaneOutcome, LaneStatus
from fabric.core.strategies import Strategy
from fabric.eval.dataset import Dataset, EvalQuery
from fabric.query.router.planner import Probe
from fabric.query.router.signals import ProbeSignals
from tools.router.labels import label_rows, query_key, read_examples, write_labels

SIG = ProbeSignals(max=0.8, min=0.3, mean=0.5, skew=0.7, dist=0.2)
OUT = LaneOutcome(lane="vector", kind=LaneKind.VECTOR, provider="fake", status=LaneStatus.SUCCESS)


def ds(tmp_path: Path) -> Dataset:
    qs = (EvalQuery(id="1", text="a"), EvalQuery(id="2", text="b"), EvalQuery(id="3", text="c"))
    return Dataset(root=tmp_path, name="cisi", split="test", corpus=tmp_path, corpus_format="beir", queries=qs,
                   qrels={})  # fmt: skip


def test_rows_round_trip(tmp_path: Path) -> None:
    """Labels follow δ; a query without a usable probe is left out; read back as examples."""
    scores = {"1": {"dense": 0.5, "temporal": 0.5, "graph": 0.58}, "2": {"dense": 0.5, "temporal": 0.53, "graph": 0}}
    probes = {
        "1": Probe(outcome=OUT, signals=SIG, query_vector=[0.1, 0.2]),
        "2": Probe(outcome=OUT, signals=SIG, query_vector=[0.3, 0.4]),
        "3": Probe(outcome=OUT, signals=None, query_vector=None),
    }
    rows = label_rows(ds(tmp_path), scores, probes, delta=0.05)
    assert [r["key"] for r in rows] == ["cisi:1", "cisi:2"]
    assert rows[0]["label"] == "graph"
    assert rows[1]["label"] == "dense"
    assert rows[1]["labels_by_delta"] == {"0.00": "temporal", "0.02": "temporal", "0.05": "dense", "0.10": "dense"}
    path = tmp_path / "labels.jsonl"
    assert write_labels(path, rows) == 2
    examples = read_examples([path])
    assert [e.label for e in examples] == [Strategy.GRAPH, Strategy.DENSE]
    assert examples[0].signals == SIG.vector()
    assert examples[1].text_vector == [0.3, 0.4]
    relabelled = read_examples([path], delta=0.0)
    assert [e.label for e in relabelled] == [Strategy.GRAPH, Strategy.TEMPORAL]
    assert query_key("cisi", "1") == "cisi:1"


def test_bad_line_names_file_and_line(tmp_path: Path) -> None:
    """A malformed line is a ConfigError with file:line."""
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps({"key": "x"}) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"labels\.jsonl:1"):
        read_examples([path])
    with pytest.raises(ConfigError, match="cannot read"):
        read_examples([tmp_path / "missing.jsonl"])
