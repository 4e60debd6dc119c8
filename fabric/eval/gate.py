"""The regression gate (US-004-004): compare an eval artifact with the committed baseline.

A metric fails when it moves the wrong way by more than its relative threshold:

=================  =========  ==========
metric             direction  threshold
=================  =========  ==========
``ndcg_at_10``     drop       2 %
``mrr_at_10``      drop       2 %
``recall_at_20``   drop       1 %
``latency_p95_ms`` rise       10 %
=================  =========  ==========

Latency is compared *normalised*: each timed fused pass divides its p95 by the median of calibration samples
taken in the same process during that pass (:mod:`fabric.eval.calibration`), so a slower or busier machine
does not fail the gate and a genuinely slower engine does. A side with several timed passes
(``latency.attempts``, see :mod:`fabric.eval.latency`) counts its best one. When either side lacks a
calibration figure, raw p95s are compared. Latency gates only a run of at least :data:`MIN_LATENCY_QUERIES`
queries: the p95 of fewer is a handful of slowest queries, and on CISI's 76 two runs of the same code a minute
apart read 4.03 and 3.54 units (14 %), past the 10 % threshold; such a run reports its latency without gating it.

The gated figures are the fused pass's, under the route the run evaluated (``config.route``; ``fabric eval`` takes
the configured default route); a baseline recorded under another route is not comparable (a problem). The
federation's figures (``metrics.federation``) are reported beside them, not gated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MIN_LATENCY_QUERIES",
    "THRESHOLDS",
    "GateCheck",
    "GateResult",
    "evaluate_gate",
    "latency_within",
    "normalised_p95",
]

THRESHOLDS: Mapping[str, tuple[str, float]] = {
    "ndcg_at_10": ("drop", 0.02),
    "mrr_at_10": ("drop", 0.02),
    "recall_at_20": ("drop", 0.01),
    "latency_p95_ms": ("rise", 0.10),
}
"""Metric → (bad direction, relative threshold)."""

MIN_LATENCY_QUERIES = 200
"""Fewest queries whose p95 the latency check gates (below it, the check reports and passes)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GateCheck:
    """The decision for one metric."""

    metric: str
    baseline: float
    current: float
    change: float
    """Relative change (current - baseline) / baseline; positive is a rise."""
    threshold: float
    direction: str
    passed: bool
    compared: str = "raw"
    """``raw``, ``normalised`` (latency divided by the calibration unit) or ``normalised, best of N``."""

    def to_dict(self) -> dict[str, Any]:
        """JSON shape of the check."""
        return {
            "baseline": round(self.baseline, 6),
            "current": round(self.current, 6),
            "change": round(self.change, 6),
            "threshold": self.threshold,
            "direction": self.direction,
            "compared": self.compared,
            "passed": self.passed,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class GateResult:
    """All checks and the overall decision."""

    checks: tuple[GateCheck, ...]
    problems: tuple[str, ...] = ()
    """Reasons the comparison itself is invalid (different dataset or split); any problem fails the gate."""

    @property
    def passed(self) -> bool:
        """True when every check passed and the runs are comparable."""
        return not self.problems and all(c.passed for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        """JSON shape of the gate section of the artifact."""
        return {
            "passed": self.passed,
            "problems": list(self.problems),
            "checks": {c.metric: c.to_dict() for c in self.checks},
        }


def _relative(current: float, baseline: float) -> float:
    if baseline == 0.0:
        return 0.0 if current == 0.0 else float("inf") if current > 0 else float("-inf")
    return (current - baseline) / baseline


def _comparability(current: Mapping[str, Any], baseline: Mapping[str, Any]) -> list[str]:
    problems = []
    cur, base = current.get("dataset", {}), baseline.get("dataset", {})
    for key in ("name", "split", "queries", "corpus_hash"):
        if key in cur and key in base and cur[key] != base[key]:
            problems.append(f"dataset.{key} differs: baseline {base[key]!r}, current {cur[key]!r}")
    # a baseline recorded before routes were evaluated measured the federation
    cur_route = (current.get("config") or {}).get("route", "all")
    base_route = (baseline.get("config") or {}).get("route", "all")
    if cur_route != base_route:
        problems.append(f"config.route differs: baseline {base_route!r}, current {cur_route!r}")
    return problems


def normalised_p95(artifact: Mapping[str, Any]) -> float | None:
    """The artifact's fused p95 in calibration units: best of ``latency.attempts``, else p95 / run unit."""
    latency = artifact.get("latency") or {}
    values = [float(a["p95_normalised"]) for a in latency.get("attempts") or () if a.get("p95_normalised")]
    if values:
        return min(values)
    unit = latency.get("calibration_ms")
    if unit:
        return float(artifact["metrics"]["fused"]["latency_p95_ms"]) / float(unit)
    return None


def latency_within(current_normalised: float, baseline: Mapping[str, Any]) -> bool:
    """True when a normalised p95 passes the latency check against ``baseline`` (True without a unit there)."""
    base = normalised_p95(baseline)
    if base is None or int((baseline.get("dataset") or {}).get("queries") or 0) < MIN_LATENCY_QUERIES:
        return True  # nothing to compare with, or too few queries to gate on (another pass cannot change it)
    return _relative(current_normalised, base) <= THRESHOLDS["latency_p95_ms"][1]


def evaluate_gate(current: Mapping[str, Any], baseline: Mapping[str, Any]) -> GateResult:
    """Compare the fused metrics of two artifacts.

    Args:
        current: the artifact of this run.
        baseline: the committed baseline artifact.

    Returns:
        one check per metric of :data:`THRESHOLDS`, plus comparability problems.
    """
    problems = _comparability(current, baseline)
    cur_m = current["metrics"]["fused"]
    base_m = baseline["metrics"]["fused"]
    cur_norm, base_norm = normalised_p95(current), normalised_p95(baseline)
    attempts = len((current.get("latency") or {}).get("attempts") or ())
    checks = []
    for metric, (direction, threshold) in THRESHOLDS.items():
        if metric not in base_m:
            problems.append(f"baseline has no metrics.fused.{metric}")
            continue
        cur_v, base_v = float(cur_m[metric]), float(base_m[metric])
        compared = "raw"
        if metric.startswith("latency") and cur_norm is not None and base_norm is not None:
            cur_v, base_v = cur_norm, base_norm
            compared = f"normalised, best of {attempts}" if attempts > 1 else "normalised"
        change = _relative(cur_v, base_v)
        passed = change >= -threshold if direction == "drop" else change <= threshold
        queries = int((current.get("dataset") or {}).get("queries") or 0)
        if metric.startswith("latency") and queries < MIN_LATENCY_QUERIES:
            passed, compared = True, f"{compared}; not gated: {queries} queries < {MIN_LATENCY_QUERIES}"
        checks.append(
            GateCheck(
                metric=metric,
                baseline=base_v,
                current=cur_v,
                change=change,
                threshold=threshold,
                direction=direction,
                passed=passed,
                compared=compared,
            )
        )
    return GateResult(checks=tuple(checks), problems=tuple(problems))
