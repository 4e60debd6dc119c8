"""Tests for the late-fusion classifier: the architecture of seed 004 §2, training, the artifact."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
from torch import nn

from fabric.core.errors import ConfigError
from fabric.core.strategies import STRATEGY_ORDER, Strategy
from fabric.query.router.classifier import Example, LateFusionClassifier, RouterClassifier, dev_split, train_classifier


def test_architecture() -> None:
    """BatchNorm over 5 signals, cat with the text vector, Linear → 256, ReLU, Dropout 0.2, Linear → 3."""
    m = LateFusionClassifier(text_dim=384)
    assert isinstance(m.signal_norm, nn.BatchNorm1d)
    assert m.signal_norm.num_features == 5
    assert (m.hidden.in_features, m.hidden.out_features) == (389, 256)
    assert m.dropout.p == 0.2
    assert (m.out.in_features, m.out.out_features) == (256, 3)
    m.eval()
    logits = m(torch.zeros(4, 384), torch.rand(4, 5))
    assert logits.shape == (4, 3)


def _examples(n: int) -> list[Example]:
    """Separable data: the text vector's first coordinate names the class; signals are noise."""
    rng = random.Random(1)
    rows = []
    for i in range(n):
        k = i % 3
        text = [3.0 if j == k else 0.0 for j in range(8)]
        text = [v + rng.gauss(0, 0.05) for v in text]
        scores = {s.value: (0.9 if idx == k else 0.2) for idx, s in enumerate(STRATEGY_ORDER)}
        rows.append(
            Example(
                query_id=f"q{i}",
                text_vector=text,
                signals=[rng.random() for _ in range(5)],
                label=STRATEGY_ORDER[k],
                scores=scores,
            )
        )
    return rows


def test_training_learns_a_separable_rule(tmp_path: Path) -> None:
    """On separable data the dev split is classified (far) better than the majority class."""
    model, report = train_classifier(_examples(120), epochs=30)
    assert report.dev_size > 10
    assert report.train_size + report.dev_size == 120
    assert report.dev_accuracy >= 0.9
    assert report.dev_routed_ndcg > report.dev_dense_ndcg
    assert report.dev_oracle_ndcg == pytest.approx(0.9)
    clf = RouterClassifier(model)
    path = tmp_path / "router" / "classifier.pt"
    clf.save(path, report, encoder="test")
    again = RouterClassifier.load(path)
    probe = _examples(3)[2]
    p1 = clf.probabilities(probe.text_vector, probe.signals)
    p2 = again.probabilities(probe.text_vector, probe.signals)
    assert p1 == pytest.approx(p2)
    assert sum(p1.values()) == pytest.approx(1.0)
    assert again.choose(probe.text_vector, probe.signals) is Strategy.GRAPH
    assert again.meta["encoder"] == "test"
    assert again.meta["report"]["dev_size"] == report.dev_size


def test_dev_split_is_stable_and_about_a_fifth() -> None:
    """A hash of the id, not a random draw."""
    ids = [f"q{i}" for i in range(2000)]
    share = sum(dev_split(i) for i in ids) / len(ids)
    assert 0.15 < share < 0.25
    assert [dev_split(i) for i in ids[:50]] == [dev_split(i) for i in ids[:50]]


def test_too_few_examples() -> None:
    """Training on a handful of queries is refused with a clear message."""
    with pytest.raises(ConfigError, match="too few"):
        train_classifier(_examples(3))


def test_missing_or_bad_artifact(tmp_path: Path) -> None:
    """A missing or foreign file is a ConfigError naming it."""
    with pytest.raises(ConfigError, match="fabric router train"):
        RouterClassifier.load(tmp_path / "none.pt")
    bad = tmp_path / "bad.pt"
    torch.save({"text_dim": 4, "state_dict": {}}, bad)
    with pytest.raises(ConfigError, match="unreadable"):
        RouterClassifier.load(bad)
