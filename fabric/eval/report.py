"""Eval artifact (``evals/artifacts/retrieval.json``) and its Markdown summary (``retrieval.md``).

The artifact holds the git revision, the baseline's revision, the dataset, the config, metrics under
``metrics.fused`` and ``metrics.lanes.<lane>``, the breakdown by scenario class, stage-usage and lane-status
counters (the staged-retrieval policy: queries per stage-2 outcome), the graph lane's entity match rate (the router
policy: share of queries
with >= 1 entity match), the staged-retrieval policy's acceptance verdict when stage-2 lanes ran
(:mod:`fabric.eval.acceptance`), the calibration figure of the latency gate, the worst queries and, when gated, the
per-metric decisions under ``gate``.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fabric.eval.acceptance import acceptance_lines, staged_acceptance
from fabric.eval.compare import COMPARED_METRICS, best_lane, compare_runs, comparison_lines
from fabric.eval.dataset import Dataset
from fabric.eval.gate import normalised_p95
from fabric.eval.metrics import METRIC_KEYS, average, query_metrics
from fabric.eval.runner import FEDERATION, FUSED, PassResult

__all__ = [
    "ARTIFACT_SCHEMA",
    "build_artifact",
    "entity_match",
    "git_revision",
    "percentile",
    "render_markdown",
    "stage_counters",
]

ARTIFACT_SCHEMA = 1
_WORST = 10


def git_revision(cwd: Path | None = None) -> str:
    """``HEAD``'s commit id (with ``-dirty`` when the tree has changes), or ``unknown`` outside git."""
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{rev}-dirty" if dirty else rev


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0–100) with linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _pass_metrics(dataset: Dataset, p: PassResult) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    per_query = {qid: query_metrics(run.doc_ids, dataset.qrels[qid]) for qid, run in p.runs.items()}
    metrics = average(per_query, dataset.query_ids)
    latencies = [run.latency_ms for run in p.runs.values()]
    metrics["latency_p50_ms"] = percentile(latencies, 50)
    metrics["latency_p95_ms"] = percentile(latencies, 95)
    overheads = [run.overhead_ms for run in p.runs.values() if run.overhead_ms is not None]
    if overheads:
        metrics["overhead_p95_ms"] = percentile(overheads, 95)
    return {k: round(v, 6) for k, v in metrics.items()}, per_query


def _scenarios(dataset: Dataset, fused: PassResult, per_query: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    classes: dict[str, list[str]] = {}
    for q in dataset.queries:
        run = fused.runs.get(q.id)
        label = q.scenario or (run.intent if run else None) or "unclassified"
        classes.setdefault(label, []).append(q.id)
    return {
        label: {"queries": len(qids), **{k: round(v, 6) for k, v in average(per_query, qids).items()}}
        for label, qids in sorted(classes.items())
    }


def stage_counters(p: PassResult) -> dict[str, float]:
    """The staged-retrieval policy's counts: queries per stage-2 outcome (``stage2_used``, ``stage2_skipped`` of which
    ``stage2_skipped_budget``, ``not_triggered``, ``no_stage2_lanes``), the stage-2 items appended in all, and the
    p50/p95 of each stage's latency. The gate values are in ``config.stages``."""
    outcomes = Counter(str(run.stages.get("stage2_outcome", "no_stage2_lanes")) for run in p.runs.values())
    stage1 = [float(run.stages.get("stage1_ms", 0.0)) for run in p.runs.values()]
    stage2 = [float(run.stages.get("stage2_ms", 0.0)) for run in p.runs.values() if run.stages.get("stage2_used")]
    return {
        "queries": len(p.runs),
        "stage2_used": outcomes["used"],
        "stage2_skipped": outcomes["skipped"] + outcomes["skipped_budget"],
        "stage2_skipped_budget": outcomes["skipped_budget"],
        "not_triggered": outcomes["not_triggered"],
        "no_stage2_lanes": outcomes["no_stage2_lanes"],
        "stage2_appended": sum(int(run.stages.get("stage2_appended", 0)) for run in p.runs.values()),
        "stage1_ms_p50": round(percentile(stage1, 50), 3),
        "stage1_ms_p95": round(percentile(stage1, 95), 3),
        "stage2_ms_p50": round(percentile(stage2, 50), 3),
        "stage2_ms_p95": round(percentile(stage2, 95), 3),
    }


def entity_match(p: PassResult) -> dict[str, Any] | None:
    """The router policy's diagnostic over the queries a graph lane answered: how many had >= 1 entity match in the
    graph
    (after normalisation) and that share (``entity_match_rate``); None when no graph lane answered."""
    matches = [run.entity_matches for run in p.runs.values() if run.entity_matches is not None]
    if not matches:
        return None
    hit = sum(1 for m in matches if m > 0)
    return {"queries": len(matches), "with_match": hit, "entity_match_rate": round(hit / len(matches), 6)}


def _lane_status(p: PassResult) -> dict[str, dict[str, int]]:
    out: dict[str, Counter[str]] = {}
    for run in p.runs.values():
        for lane, status in run.lane_status.items():
            out.setdefault(lane, Counter())[status] += 1
    return {lane: dict(sorted(c.items())) for lane, c in sorted(out.items())}


def _warnings(passes: Mapping[str, PassResult]) -> list[str]:
    """One line per lane that did not answer every query itself: its figures then measure something else."""
    out = []
    for name, p in passes.items():
        for lane, counts in _lane_status(p).items():
            bad = {status: n for status, n in counts.items() if status != "success"}
            if bad:
                detail = ", ".join(f"{status} {n}/{len(p.runs)}" for status, n in sorted(bad.items()))
                out.append(f"{name} pass: lane {lane} {detail}")
    return out


def _worst(dataset: Dataset, fused: PassResult, per_query: Mapping[str, Mapping[str, float]]) -> list[dict[str, Any]]:
    texts = {q.id: q.text for q in dataset.queries}
    order = sorted(dataset.query_ids, key=lambda q: (per_query.get(q, {}).get("ndcg_at_10", 0.0), q))
    out = []
    for qid in order[:_WORST]:
        run = fused.runs.get(qid)
        out.append(
            {
                "query_id": qid,
                "query": texts[qid],
                "ndcg_at_10": round(per_query.get(qid, {}).get("ndcg_at_10", 0.0), 6),
                "expected": {d: g for d, g in dataset.qrels[qid].items() if g > 0},
                "returned": list(run.doc_ids[:5]) if run else [],
            }
        )
    return out


def build_artifact(
    dataset: Dataset,
    passes: Mapping[str, PassResult],
    *,
    config: Mapping[str, Any],
    calibration_ms: float | None,
    calibration_samples: int = 0,
    latency_attempts: Sequence[Mapping[str, Any]] = (),
    corpus_hash: str,
    wall_time_s: float,
    revision: str,
) -> dict[str, Any]:
    """Assemble the artifact from the fused pass (required) and the per-lane passes.

    Args:
        dataset: the judged queries.
        passes: pass name → result; ``fused`` must be present.
        config: fusion mode, k, weights, lanes, mode, top_k, ... as run.
        calibration_ms: median of the run's ``calibration_samples`` calibration samples (None: not measured).
        latency_attempts: the timed fused passes for the gate (:class:`fabric.eval.latency.LatencyAttempt`
            dicts); ``latency.p95_normalised`` is the best of them when given.
        corpus_hash: the dataset's corpus hash.
        wall_time_s: the eval's wall time.
        revision: the git revision evaluated.
    """
    fused = passes[FUSED]
    fused_metrics, per_query = _pass_metrics(dataset, fused)
    scored = {name: _pass_metrics(dataset, p) for name, p in passes.items() if name != FUSED}
    lanes = {name: m for name, (m, _) in scored.items() if name != FEDERATION}
    metrics: dict[str, Any] = {"fused": fused_metrics, "lanes": lanes}
    if FEDERATION in scored:
        metrics[FEDERATION] = scored[FEDERATION][0]
    artifact: dict[str, Any] = {
        "schema": ARTIFACT_SCHEMA,
        "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "git_revision": revision,
        "baseline_revision": None,
        "dataset": _dataset_section(dataset, corpus_hash),
        "split": dataset.split,
        "config": dict(config),
        "metrics": metrics,
        "breakdown": {
            "lane": {name: {k: m[k] for k in ("ndcg_at_10", "mrr_at_10", "recall_at_20")} for name, m in lanes.items()},
            "scenario": _scenarios(dataset, fused, per_query),
        },
        "stages": stage_counters(fused),
        "acceptance": staged_acceptance(config, metrics),
        "graph": entity_match(fused),
        "lane_status": _lane_status(fused),
        "latency": _latency_section(config, calibration_ms, calibration_samples, latency_attempts),
        "warnings": _warnings(passes),
        "worst_queries": _worst(dataset, fused, per_query),
        "per_query": _per_query(per_query),
        "comparison": _comparison(dataset, per_query, {name: q for name, (_, q) in scored.items()}, lanes),
        "wall_time_s": round(wall_time_s, 2),
        "gate": None,
    }
    normalised = normalised_p95(artifact)
    artifact["latency"]["p95_normalised"] = round(normalised, 6) if normalised is not None else None
    return artifact


def _per_query(per_query: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """The fused run's compared metrics per query, so another run can be compared with this one query by query."""
    return {q: {k: round(m[k], 6) for k in COMPARED_METRICS} for q, m in sorted(per_query.items())}


def _comparison(
    dataset: Dataset,
    fused: Mapping[str, Mapping[str, float]],
    others: Mapping[str, Mapping[str, Mapping[str, float]]],
    lanes: Mapping[str, Mapping[str, float]],
) -> dict[str, Any]:
    """Fused against the best single lane (``best_lane``) and against the federation, when those passes ran."""
    out: dict[str, Any] = {}
    best = best_lane(lanes) if len(lanes) > 1 else None
    qids = list(dataset.query_ids)
    if best is not None:
        out["best_lane"] = compare_runs(fused, others[best], qids, against=f"best lane ({best})")
    if FEDERATION in others:
        out[FEDERATION] = compare_runs(fused, others[FEDERATION], qids, against="federation (route all)")
    return out


def _dataset_section(dataset: Dataset, corpus_hash: str) -> dict[str, Any]:
    return {
        "name": dataset.name,
        "path": str(dataset.root),
        "split": dataset.split,
        "queries": len(dataset.queries),
        "corpus": str(dataset.corpus),
        "corpus_hash": corpus_hash,
    }


def _latency_section(
    config: Mapping[str, Any],
    calibration_ms: float | None,
    calibration_samples: int,
    latency_attempts: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """How latency was measured, the calibration, and the timed attempts (``p95_normalised`` is filled later)."""
    return {
        "measured": (
            f"wall time around engine.search, {config.get('concurrency', 1)} query in flight, "
            "after an untimed warm-up pass (models loaded, stores open); every query encoded inside its timed call "
            "(no cached query vectors)"
        ),
        "calibration_ms": round(calibration_ms, 4) if calibration_ms else None,
        "calibration_samples": calibration_samples,
        "p95_normalised": None,
        "attempts": [dict(a) for a in latency_attempts],
    }


def _fmt(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _encoding_lines(enc: Mapping[str, Any] | None) -> list[str]:
    if not enc:
        return []
    times = f"p50 {enc['p50_ms']} ms, p95 {enc['p95_ms']} ms"
    return [f"- query encoding, inside every latency: {times} ({enc.get('share_of_fused_p50')} of the fused p50)"]


def render_markdown(artifact: Mapping[str, Any]) -> str:
    """The human summary: metrics table, scenario breakdown, gate, counters and the worst queries."""
    ds = artifact["dataset"]
    cfg = artifact["config"]
    lines = [
        f"# Retrieval eval: {ds['name']} ({ds['split']}, {ds['queries']} queries)",
        "",
        f"- revision `{artifact['git_revision']}`, baseline `{artifact.get('baseline_revision')}`",
        f"- fusion `{cfg.get('fusion_mode')}` k={cfg.get('rrf_k')}, lanes {', '.join(cfg.get('lanes', []))}, "
        f"weights {cfg.get('weights')}",
        f"- wall time {artifact['wall_time_s']} s; latency: {artifact['latency']['measured']}, "
        f"calibration unit {artifact['latency']['calibration_ms']} ms",
        *_encoding_lines(artifact.get("encoding")),
        *(f"- **warning**: {w}" for w in artifact.get("warnings", [])),
        "",
        "| run | " + " | ".join(METRIC_KEYS) + " | p50 ms | p95 ms |",
        "| --- |" + " ---: |" * (len(METRIC_KEYS) + 2),
    ]
    rows = {f"fused (route {cfg.get('route', 'all')})": artifact["metrics"]["fused"]}
    if FEDERATION in artifact["metrics"]:
        rows["federation (route all)"] = artifact["metrics"][FEDERATION]
    rows.update(artifact["metrics"]["lanes"])
    for name, m in rows.items():
        cells = [_fmt(m.get(k)) for k in (*METRIC_KEYS, "latency_p50_ms", "latency_p95_ms")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## By scenario class (fused)",
        "",
        "| class | queries | ndcg_at_10 | mrr_at_10 | hit_at_1 | hit_at_5 |",
    ]
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: |")
    for label, m in artifact["breakdown"]["scenario"].items():
        cells = [_fmt(m[k]) for k in ("ndcg_at_10", "mrr_at_10", "hit_at_1", "hit_at_5")]
        lines.append(f"| {label} | {m['queries']} | " + " | ".join(cells) + " |")
    lines += comparison_lines(artifact.get("comparison"))
    lines += _gate_lines(artifact.get("gate"))
    lines += acceptance_lines(artifact.get("acceptance"))
    lines += ["", "## Stage usage and lane status (fused pass)", ""]
    gates = cfg.get("stages")
    if gates:
        lines.append("- gate: " + ", ".join(f"`{k}` {v}" for k, v in gates.items()))
    lines += [f"- `{k}`: {_fmt(v)}" for k, v in artifact["stages"].items()] or ["- no stage counters reported"]
    lines += [f"- lane `{lane}`: {c}" for lane, c in artifact["lane_status"].items()]
    graph = artifact.get("graph")
    if graph:
        lines.append(
            f"- graph entity match rate: {graph['entity_match_rate']:.2%} of {graph['queries']} queries "
            f"({graph['with_match']}) with >= 1 entity match in the graph"
        )
    lines += _worst_lines(artifact["worst_queries"])
    return "\n".join(lines) + "\n"


def _gate_lines(gate: Mapping[str, Any] | None) -> list[str]:
    """The gate's verdict and its per-metric table (nothing without a gate)."""
    if not gate:
        return []
    lines = ["", f"## Gate: {'PASS' if gate['passed'] else 'FAIL'}", ""]
    lines += [f"- problem: {p}" for p in gate["problems"]]
    lines += [
        "| metric | baseline | current | change | threshold | result |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for metric, c in gate["checks"].items():
        lines.append(
            f"| {metric} ({c['compared']}) | {c['baseline']:.4f} | {c['current']:.4f} | {c['change']:+.2%} | "
            f"{c['direction']} > {c['threshold']:.0%} | {'pass' if c['passed'] else 'FAIL'} |"
        )
    return lines


def _worst_lines(worst: list[Mapping[str, Any]]) -> list[str]:
    """The worst queries with what was expected and what came back."""
    lines = ["", f"## Worst {len(worst)} queries (fused nDCG@10)", ""]
    for w in worst:
        expected = ", ".join(f"`{d}`" for d in w["expected"])
        got = ", ".join(f"`{d}`{' ✓' if d in w['expected'] else ''}" for d in w["returned"]) or "nothing"
        lines.append(
            f"- **{w['query_id']}** {w['query']!r} (nDCG@10 {w['ndcg_at_10']:.3f}): expected {expected}; got {got}"
        )
    return lines
