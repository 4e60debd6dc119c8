"""Oracle label files: per query, each strategy's nDCG@10, the gold label (and per ablated δ), the probe.

``fabric router label DATASET`` writes one JSON line per judged query to ``<home>/router/labels/<name>.jsonl``::

    {"key": "scifact:13", "dataset": "scifact", "query_id": "13", "text": "...",
     "scores": {"dense": 0.63, "temporal": 0.63, "graph": 0.5}, "label": "dense",
     "labels_by_delta": {"0.00": "dense", ...}, "signals": {"max": ..., "dist": ...},
     "query_vector": [384 floats]}

``fabric router train`` reads them back as :class:`~fabric.query.router.classifier.Example` rows. ``key`` (dataset and
query id) names a query across datasets; the dev split hashes it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fabric.core.errors import ConfigError
from fabric.core.models import LaneRequest
from fabric.core.strategies import Strategy
from fabric.eval.dataset import Dataset
from fabric.query.executor import PlannedLane
from fabric.query.preflight import refine_rules
from fabric.query.router.oracle import ABLATION_DELTAS, select_gold_label
from fabric.query.router.planner import Probe
from fabric.query.router.signals import ProbeSignals

__all__ = ["collect_probes", "label_rows", "query_key", "read_examples", "write_labels"]

_PROBE_BUDGET_MS = 10_000.0


def query_key(dataset: str, query_id: str) -> str:
    """A query's name across datasets (``scifact:13``)."""
    return f"{dataset}:{query_id}"


async def collect_probes(engine: Any, dataset: Dataset) -> dict[str, Probe]:
    """Query id → the probe the router would run for it (refined query, unfiltered, the configured depth)."""
    router = engine.router
    name = router.config.probe_lane
    embedder = engine.resources.embedder if engine.resources is not None else None
    available = {name: PlannedLane(name=name, budget_ms=_PROBE_BUDGET_MS)}
    loop = asyncio.get_running_loop()
    year = datetime.now(UTC).year
    out: dict[str, Probe] = {}
    for q in dataset.queries:
        req = LaneRequest(query=refine_rules(q.text, current_year=year).query, top_k=engine.settings.engine.lane_top_k)
        probe = await router.run_probe(available, req, loop.time() + _PROBE_BUDGET_MS / 1000.0, embedder)
        if probe is not None:
            out[q.id] = probe
    return out


def label_rows(
    dataset: Dataset,
    scores: Mapping[str, Mapping[str, float]],
    probes: Mapping[str, Probe],
    *,
    delta: float,
) -> list[dict[str, Any]]:
    """One row per query that has scores and a usable probe (signals and a query vector)."""
    rows: list[dict[str, Any]] = []
    for q in dataset.queries:
        probe = probes.get(q.id)
        if q.id not in scores or probe is None or probe.signals is None or probe.query_vector is None:
            continue
        s = scores[q.id]
        rows.append(
            {
                "key": query_key(dataset.name, q.id),
                "dataset": dataset.name,
                "query_id": q.id,
                "text": q.text,
                "scores": {k: round(v, 6) for k, v in s.items()},
                "label": select_gold_label(s, delta=delta).value,
                "labels_by_delta": {f"{d:.2f}": select_gold_label(s, delta=d).value for d in ABLATION_DELTAS},
                "signals": probe.signals.to_dict(),
                "query_vector": [round(float(v), 7) for v in probe.query_vector],
            }
        )
    return rows


def write_labels(path: Path, rows: Iterable[Mapping[str, Any]]) -> int:
    """Write rows as JSON lines; returns the count."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
            n += 1
    return n


def read_examples(paths: Sequence[Path], *, delta: float | None = None) -> list[Any]:
    """Label files → training examples (the label recomputed for ``delta`` when given).

    Raises:
        ConfigError: a missing file or a malformed line (file and line named).
    """
    from fabric.query.router.classifier import Example

    out: list[Example] = []
    for path in paths:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ConfigError(f"cannot read labels: {exc.strerror}", source=str(path)) from None
        for n, line in enumerate(lines, start=1):
            try:
                row = json.loads(line)
                scores = {k: float(v) for k, v in row["scores"].items()}
                label = select_gold_label(scores, delta=delta) if delta is not None else Strategy(row["label"])
                out.append(
                    Example(
                        query_id=str(row["key"]),
                        text_vector=[float(v) for v in row["query_vector"]],
                        signals=ProbeSignals.from_mapping(row["signals"]).vector(),
                        label=label,
                        scores=scores,
                    )
                )
            except (ValueError, KeyError, TypeError) as exc:
                raise ConfigError(f"malformed label line: {exc}", source=f"{path}:{n}") from None
    return out
