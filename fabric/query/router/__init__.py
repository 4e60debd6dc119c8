"""The query router of the router policy: which lanes a query is worth, decided before the lanes run.

Modules (import the one you need; nothing heavy is imported here):

- :mod:`fabric.settings.router`: the ``[router]`` settings (thresholds, strategy lane lists, classifier artifact);
- :mod:`fabric.core.strategies`: the strategies (Dense, Temporal, Graph) and routes (``auto``, ``all``, a strategy);
- :mod:`fabric.query.router.signals`: the five probe signals (max, min, mean, skewness, semantic distance);
- :mod:`fabric.query.router.heuristic`: the priority cascade;
- :mod:`fabric.query.router.oracle`: ``select_gold_label`` and its δ ablation;
- :mod:`fabric.query.router.classifier`: the late-fusion classifier (torch, imported only when used);
- :mod:`fabric.query.router.planner`: the engine's planning seam (probe, decision, lane plan, route record);
- :mod:`tools.router.evaluation`: per-route passes and the quality-against-cost report;
- :mod:`tools.router.labels`: oracle label files (scores, labels per δ, probe signals, query vectors);
- :mod:`tools.router.tuning`: the heuristic replayed over label files for a grid of thresholds.
"""

__all__: list[str] = []
