"""The late-fusion routing classifier of the router policy, and its training loop.

Text branch: the query's sentence embedding from the project's frozen MiniLM (all-MiniLM-L6-v2, 384 floats,
through the same cached embedder as the vector lane). The router policy names DistilBERT's ``[CLS]`` vector (768); its
weights cannot be downloaded here (no network, no PyPI package ships them), so the text branch is MiniLM's
mean-pooled sentence vector instead, frozen. Signal branch: ``BatchNorm1d`` over ``[max, min, mean, skew, dist]``.
Fusion: ``cat`` → Linear(384 + 5 → 256) → ReLU → Dropout(0.2) → Linear(256 → 3) → softmax over
(Dense, Temporal, Graph).

The artifact (``torch.save`` of plain tensors and values, loaded with ``weights_only=True``) holds the state dict,
the sizes, the encoder name and the training report.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from fabric.core.errors import ConfigError
from fabric.core.strategies import STRATEGY_ORDER, Strategy
from fabric.query.router.signals import SIGNAL_NAMES

__all__ = ["Example", "LateFusionClassifier", "RouterClassifier", "TrainReport", "dev_split", "train_classifier"]

HIDDEN = 256
DROPOUT = 0.2


class LateFusionClassifier(nn.Module):
    """Text vector ⊕ batch-normalised signals → 256 → 3 logits."""

    def __init__(self, text_dim: int, n_signals: int = len(SIGNAL_NAMES), n_classes: int = len(STRATEGY_ORDER)):
        super().__init__()
        self.text_dim = text_dim
        self.signal_norm = nn.BatchNorm1d(n_signals)
        self.hidden = nn.Linear(text_dim + n_signals, HIDDEN)
        self.dropout = nn.Dropout(DROPOUT)
        self.out = nn.Linear(HIDDEN, n_classes)

    def forward(self, text: torch.Tensor, signals: torch.Tensor) -> torch.Tensor:
        """Logits (batch × classes); apply softmax for probabilities."""
        fused = torch.cat([text, self.signal_norm(signals)], dim=1)
        logits: torch.Tensor = self.out(self.dropout(torch.relu(self.hidden(fused))))
        return logits


@dataclass(frozen=True, slots=True, kw_only=True)
class Example:
    """One labelled query."""

    query_id: str
    text_vector: Sequence[float]
    signals: Sequence[float]
    label: Strategy
    scores: Mapping[str, float]
    """Each strategy's nDCG@10 (to score the routed quality on the dev split)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainReport:
    """What training measured on the held-out dev split."""

    train_size: int
    dev_size: int
    epochs: int
    labels: Mapping[str, int]
    dev_accuracy: float
    dev_majority_accuracy: float
    dev_routed_ndcg: float
    dev_oracle_ndcg: float
    dev_dense_ndcg: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {k: getattr(self, k) if not isinstance(getattr(self, k), float) else round(getattr(self, k), 4)
                for k in self.__dataclass_fields__}  # fmt: skip


def dev_split(query_id: str, share: float = 0.2) -> bool:
    """Whether a query belongs to the dev split: a stable hash of its id, about ``share`` of all ids."""
    digest = hashlib.sha256(query_id.encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < share


def _tensors(rows: Sequence[Example]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    text = torch.tensor([list(r.text_vector) for r in rows], dtype=torch.float32)
    sig = torch.tensor([list(r.signals) for r in rows], dtype=torch.float32)
    y = torch.tensor([STRATEGY_ORDER.index(r.label) for r in rows], dtype=torch.long)
    return text, sig, y


def _fit(model: LateFusionClassifier, rows: Sequence[Example], epochs: int, seed: int) -> None:
    text, sig, y = _tensors(rows)
    counts = torch.bincount(y, minlength=len(STRATEGY_ORDER)).float()
    weight = torch.where(counts > 0, counts.sum() / (len(STRATEGY_ORDER) * counts.clamp(min=1)), torch.zeros(1))
    loss_fn = nn.CrossEntropyLoss(weight=weight)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    gen = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(rows), generator=gen)
        for start in range(0, len(rows), 64):
            idx = order[start : start + 64]
            if len(idx) < 2:  # batch norm needs two rows in training mode
                continue
            opt.zero_grad()
            loss = loss_fn(model(text[idx], sig[idx]), y[idx])
            loss.backward()
            opt.step()
    model.eval()


def train_classifier(
    examples: Sequence[Example], *, epochs: int = 60, seed: int = 0
) -> tuple[LateFusionClassifier, TrainReport]:
    """Train on the non-dev examples, report on the dev split (:func:`dev_split`).

    Raises:
        ConfigError: too few examples, or an empty split.
    """
    train = [e for e in examples if not dev_split(e.query_id)]
    dev = [e for e in examples if dev_split(e.query_id)]
    if len(train) < 4 or not dev:
        raise ConfigError(f"too few labelled queries to train ({len(train)} train, {len(dev)} dev)", source="labels")
    torch.manual_seed(seed)
    model = LateFusionClassifier(text_dim=len(train[0].text_vector))
    _fit(model, train, epochs, seed)
    clf = RouterClassifier(model)
    picks = [clf.choose(e.text_vector, e.signals) for e in dev]
    majority = max(STRATEGY_ORDER, key=lambda s: sum(e.label is s for e in train))
    labels = {s.value: sum(e.label is s for e in examples) for s in STRATEGY_ORDER}
    n = len(dev)
    report = TrainReport(
        train_size=len(train),
        dev_size=n,
        epochs=epochs,
        labels=labels,
        dev_accuracy=sum(p is e.label for p, e in zip(picks, dev, strict=True)) / n,
        dev_majority_accuracy=sum(e.label is majority for e in dev) / n,
        dev_routed_ndcg=sum(e.scores[p] for p, e in zip(picks, dev, strict=True)) / n,
        dev_oracle_ndcg=sum(e.scores[e.label] for e in dev) / n,
        dev_dense_ndcg=sum(e.scores[Strategy.DENSE] for e in dev) / n,
    )
    return model, report


class RouterClassifier:
    """A trained :class:`LateFusionClassifier` in inference mode."""

    def __init__(self, model: LateFusionClassifier, meta: Mapping[str, Any] | None = None) -> None:
        self.model = model.eval()
        self.meta = dict(meta or {})

    def probabilities(self, text_vector: Sequence[float], signals: Sequence[float]) -> dict[Strategy, float]:
        """Softmax over the strategies for one query."""
        with torch.inference_mode():
            text = torch.tensor([list(text_vector)], dtype=torch.float32)
            sig = torch.tensor([list(signals)], dtype=torch.float32)
            probs = torch.softmax(self.model(text, sig), dim=1)[0].tolist()
        return dict(zip(STRATEGY_ORDER, (float(p) for p in probs), strict=True))

    def choose(self, text_vector: Sequence[float], signals: Sequence[float]) -> Strategy:
        """The most probable strategy (ties: the simpler one)."""
        probs = self.probabilities(text_vector, signals)
        return max(STRATEGY_ORDER, key=lambda s: (probs[s], -STRATEGY_ORDER.index(s)))

    def save(self, path: Path, report: TrainReport | None = None, **meta: Any) -> None:
        """Write the artifact (parent folders created)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "state_dict": self.model.state_dict(),
            "text_dim": self.model.text_dim,
            "classes": [s.value for s in STRATEGY_ORDER],
            "signals": list(SIGNAL_NAMES),
            "report": report.to_dict() if report else {},
            **meta,
        }
        torch.save(payload, path)

    @classmethod
    def load(cls, path: Path) -> RouterClassifier:
        """Read an artifact written by :meth:`save`.

        Raises:
            ConfigError: missing or unreadable file, or classes that do not match.
        """
        if not path.is_file():
            raise ConfigError("classifier artifact not found (run `fabric router train`)", source=str(path))
        try:
            data = torch.load(path, map_location="cpu", weights_only=True)
            model = LateFusionClassifier(text_dim=int(data["text_dim"]))
            model.load_state_dict(data["state_dict"])
        except (OSError, RuntimeError, KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"unreadable classifier artifact: {exc}", source=str(path)) from None
        if list(data.get("classes", [])) != [s.value for s in STRATEGY_ORDER]:
            raise ConfigError(f"classes {data.get('classes')} do not match {list(STRATEGY_ORDER)}", source=str(path))
        return cls(model, {k: v for k, v in data.items() if k != "state_dict"})
