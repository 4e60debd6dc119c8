"""The staged-retrieval policy's report-level acceptance verdict, in every eval report of a run with stage-2 lanes.

The policy accepts its staged arm when both hold:

- the fused pass's p95 latency is at most ``[fusion.stages] p95_target_ms`` (the policy: 1500 ms);
- its recall@k is not below the stage-2-only arm's: the pass of each stage-2 lane alone (the policy's "LanceDB-only
  baseline"), k = 10, the policy's final ``top_k``. With several stage-2 lanes, the best of them is the arm.

Without a stage-2-only pass (``--no-lane-passes``) the recall half is not measured and the verdict says so; either
way the figures and the recall difference are in the report, so a degradation is quantified, not only flagged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["RECALL_METRIC", "acceptance_lines", "staged_acceptance"]

RECALL_METRIC = "recall_at_10"
"""The recall@k of the verdict: k = 10, the staged-retrieval policy's final ``top_k``."""


def staged_acceptance(config: Mapping[str, Any], metrics: Mapping[str, Any]) -> dict[str, Any] | None:
    """The verdict from the artifact's ``config`` and ``metrics`` sections; None when the run had no stage-2 lane."""
    stages = config.get("stages") or {}
    stage2 = list(stages.get("stage2_lanes") or ())
    if not stage2:
        return None
    fused = metrics["fused"]
    target = float(stages.get("p95_target_ms", 1500.0))
    p95 = float(fused["latency_p95_ms"])
    recall = float(fused[RECALL_METRIC])
    lanes = metrics.get("lanes", {})
    arms = {lane: float(lanes[lane][RECALL_METRIC]) for lane in stage2 if lane in lanes}
    arm = max(sorted(arms), key=arms.__getitem__) if arms else None
    recall_passed = recall >= arms[arm] if arm is not None else None
    p95_passed = p95 <= target
    return {
        "passed": None if recall_passed is None else p95_passed and recall_passed,
        "p95_ms": round(p95, 3),
        "p95_target_ms": target,
        "p95_passed": p95_passed,
        "recall_metric": RECALL_METRIC,
        "recall": round(recall, 6),
        "stage2_only": arms,
        "arm": arm,
        "recall_delta": round(recall - arms[arm], 6) if arm is not None else None,
        "recall_passed": recall_passed,
    }


def acceptance_lines(verdict: Mapping[str, Any] | None) -> list[str]:
    """The verdict's Markdown section (nothing without stage-2 lanes)."""
    if not verdict:
        return []
    word = {True: "PASS", False: "FAIL", None: "NOT MEASURED"}[verdict["passed"]]
    mark = {True: "pass", False: "FAIL", None: "not measured"}
    lines = [
        "",
        f"## Staged acceptance: {word}",
        "",
        f"- fused p95 {verdict['p95_ms']:.1f} ms <= {verdict['p95_target_ms']:g} ms: {mark[verdict['p95_passed']]}",
    ]
    metric = verdict["recall_metric"]
    if verdict["arm"] is None:
        lines.append(f"- {metric} {verdict['recall']:.4f}; no stage-2-only pass to compare with: not measured")
    else:
        arm = verdict["arm"]
        lines.append(
            f"- {metric} {verdict['recall']:.4f} >= the stage-2-only arm's ({arm}: "
            f"{verdict['stage2_only'][arm]:.4f}; difference {verdict['recall_delta']:+.4f}): "
            f"{mark[verdict['recall_passed']]}"
        )
    return lines
