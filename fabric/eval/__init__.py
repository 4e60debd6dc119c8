"""Evaluation harness: BEIR loading, ranking metrics, engine passes, artifacts, the regression gate, tuning.

Modules: :mod:`~fabric.eval.dataset` (loader), :mod:`~fabric.eval.metrics` (hit/precision/recall/MRR/nDCG),
:mod:`~fabric.eval.runner` (passes over an engine), :mod:`~fabric.eval.harness` (scratch homes, plans),
:mod:`~fabric.eval.report` (artifact and Markdown), :mod:`~fabric.eval.gate` (US-004-004 thresholds),
:mod:`~fabric.eval.calibration` (latency normalisation), :mod:`~tools.fusion_tuning` (offline fusion search).
Nothing here imports the engine at import time.

Floor: imports query and ingest (and what they stand on); never serve or the CLI.
"""

__all__: list[str] = []
