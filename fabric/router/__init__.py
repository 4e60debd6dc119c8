"""The query router of seed 004: which lanes a query is worth, decided before the lanes run.

Modules (import the one you need; nothing heavy is imported here):

- :mod:`fabric.router.config`: the ``[router]`` settings (thresholds, strategy lane lists, classifier artifact);
- :mod:`fabric.router.strategies`: the strategies (Dense, Temporal, Graph) and routes (``auto``, ``all``, a strategy);
- :mod:`fabric.router.signals`: the five probe signals of §3 (max, min, mean, skewness, semantic distance);
- :mod:`fabric.router.heuristic`: the priority cascade of §1;
- :mod:`fabric.router.oracle`: ``select_gold_label`` of §5 and its δ ablation;
- :mod:`fabric.router.classifier`: the late-fusion classifier of §2 (torch, imported only when used);
- :mod:`fabric.router.planner`: the engine's planning seam (probe, decision, lane plan, route record);
- :mod:`fabric.router.evaluation`: per-route passes and the quality-against-cost report;
- :mod:`fabric.router.labels`: oracle label files (scores, labels per δ, probe signals, query vectors);
- :mod:`fabric.router.tuning`: the heuristic replayed over label files for a grid of thresholds.
"""

__all__: list[str] = []
