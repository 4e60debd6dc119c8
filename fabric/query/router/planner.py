"""The engine's planning seam: for ``route != "all"``, which lanes run, with which filters, and why.

:meth:`Router.plan` takes the engine's full plan (every lane the request may use) and returns a
:class:`RoutedPlan`: the lanes of the chosen strategy, the lane request they get (the query's year range kept as
a filter only for Temporal), the outcomes already known (the probe, reused so its cost is not wasted) and the
:class:`~fabric.core.strategies.RouteRecord` for the result.

Order of work: a forced strategy (``route = "dense"`` …) needs nothing else. ``auto`` with the heuristic asks the
query's words first (rules 1–2) and runs the probe only when they decide nothing; ``auto`` with the classifier
always runs the probe (its signals are inputs). The probe is the probe lane (``vector``) called once, unfiltered,
through the executor (budget, fallback and penalties apply); the signals come from its top ``probe_k`` scores and,
for the classifier only, the embeddings of the same hits (re-embedded through the content-hash cache: a lookup when
ingestion filled it, a model run per hit when not). The heuristic reads the scores alone, so it embeds nothing.

Temporal with a year range: the lanes get the range as a hard filter (:func:`fabric.query.year_filter.hard_years`),
so they rank only among the items of those years, as deep as their store goes, and never pad with other years.
With a probe, its hits are filtered by year (``Hit.metadata["years"]``, else the publication year) and reused when
at least ``top_k`` pass; otherwise the lane runs again with the hard filter (the router policy's deep fill).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabric.core.errors import ConfigError
from fabric.core.logs import get_logger
from fabric.core.models import Embedder, Hit, LaneOutcome, LaneRequest, LaneStatus, PreflightResult, SearchRequest
from fabric.core.strategies import STRATEGY_ORDER, RouteRecord, Strategy
from fabric.query.executor import LaneExecutor, PlannedLane, RunStats
from fabric.query.router.heuristic import Decision, decide_signals, decide_text
from fabric.query.router.signals import ProbeSignals, compute_signals
from fabric.query.source_filter import STORE_KINDS
from fabric.query.year_filter import hard_years, restrict_years
from fabric.settings.router import RouterConfig

if TYPE_CHECKING:
    from fabric.query.router.classifier import RouterClassifier

__all__ = ["PROBE_ALONE", "Probe", "RoutedPlan", "Router", "filter_years"]

log = get_logger(__name__)

PROBE_ALONE = "probe_confident"
"""Rule name of a Dense answered from the probe alone (``[router] probe_alone``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RoutedPlan:
    """What the engine runs after routing."""

    plan: list[PlannedLane]
    """The strategy's lanes (those in :attr:`done` included: the result lists them)."""
    lane_request: LaneRequest
    """The request the remaining lanes get."""
    done: Mapping[str, LaneOutcome]
    """Outcomes already known (the reused probe); the engine does not run these lanes again."""
    record: RouteRecord
    wait_ms: float = 0.0
    """Time spent waiting on the probe lane (lane time, not the engine's overhead)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    """The probe's outcome and signals (None when it failed or returned nothing comparable)."""

    outcome: LaneOutcome
    signals: ProbeSignals | None
    query_vector: Sequence[float] | None
    wait_ms: float = 0.0
    others: Mapping[str, LaneOutcome] = field(default_factory=dict)
    """Lanes every strategy runs, started with the probe (unfiltered) so that they do not wait for the decision."""


def filter_years(hits: Sequence[Hit], years: tuple[int, int]) -> list[Hit]:
    """Hits mentioning a year in ``years`` (``metadata["years"]``, else the publication year), re-ranked 1..n."""
    return restrict_years(list(hits), years)


class Router:
    """Routes one query at a time (see the module docstring).

    Args:
        config: the ``[router]`` settings.
        executor: the engine's lane executor (the probe runs through it).
        home: the home the classifier artifact is read from.
    """

    def __init__(self, config: RouterConfig, *, executor: LaneExecutor, home: Path) -> None:
        self.config = config
        self.executor = executor
        self.home = home
        self.chooser = config.auto
        """Who decides ``route = "auto"``; evaluations switch it between passes."""
        self.classifier: RouterClassifier | None = None
        """The loaded classifier (read from the home on first use when None)."""
        self._classifier_error: str | None = None

    async def plan(
        self,
        request: SearchRequest,
        preflight: PreflightResult,
        plan: Sequence[PlannedLane],
        lane_request: LaneRequest,
        *,
        now: datetime,
        deadline: float,
        embedder: Embedder | None,
    ) -> RoutedPlan:
        """Decide the strategy of ``request`` and return the lanes to run (see :class:`RoutedPlan`)."""
        unfiltered = lane_request
        if preflight.years is not None and not preflight.bypassed:  # the same binding without the query's years
            unfiltered = dataclasses.replace(
                lane_request, constraints=dataclasses.replace(lane_request.constraints, query_years=None)
            )
        available = {p.name: p for p in plan}
        probe: Probe | None = None
        probs: dict[Strategy, float] | None = None
        if request.route in (s.value for s in STRATEGY_ORDER):
            decision = Decision(
                strategy=Strategy(request.route), rule=f"route={request.route}", reason="forced by the request"
            )
            chooser = "request"
        else:
            decision, chooser, probe, probs = await self._decide_auto(
                request, available, unfiltered, deadline, embedder
            )
        return self._build(decision, chooser, request, preflight, available, lane_request, unfiltered, probe, probs)

    async def _decide_auto(
        self,
        request: SearchRequest,
        available: Mapping[str, PlannedLane],
        unfiltered: LaneRequest,
        deadline: float,
        embedder: Embedder | None,
    ) -> tuple[Decision, str, Probe | None, dict[Strategy, float] | None]:
        classifier = self._classifier() if self.chooser == "classifier" else None
        if classifier is None:
            decided = decide_text(request.query, self.config)
            note = f" (classifier unavailable: {self._classifier_error})" if self.chooser == "classifier" else ""
            if decided is not None:
                return dataclasses.replace(decided, reason=decided.reason + note), "heuristic", None, None
        probe = await self.run_probe(
            available, unfiltered, deadline, embedder, also=self._common(available), distance=classifier is not None
        )
        if probe is None or probe.signals is None:
            why = "probe lane not planned" if probe is None else f"probe {probe.outcome.status.value}"
            return Decision(strategy=Strategy.DENSE, rule="no_probe", reason=f"{why}: Dense"), "heuristic", probe, None
        if classifier is not None and probe.query_vector is not None:
            probs = classifier.probabilities(probe.query_vector, probe.signals.vector())
            best = max(STRATEGY_ORDER, key=lambda s: (probs[s], -STRATEGY_ORDER.index(s)))
            reason = f"classifier: p({best.value}) = {probs[best]:.3f}"
            chosen = self._alone(Decision(strategy=best, rule="late_fusion_mlp", reason=reason), probe)
            return chosen, "classifier", probe, probs
        decided = decide_signals(probe.signals, self.config)
        return self._alone(decided, probe), "heuristic", probe, None

    def _alone(self, decided: Decision, probe: Probe) -> Decision:
        """Dense from the probe alone when ``probe_alone`` is on and the probe's top score stands out."""
        scores = [h.score for h in probe.outcome.hits[:2]]
        if not self.config.probe_alone or decided.strategy is not Strategy.DENSE or len(scores) < 2:
            return decided
        margin = scores[0] - scores[1]
        if margin < self.config.probe_alone_margin:
            return decided
        reason = f"confident probe (top score {margin:.3f} above the next >= {self.config.probe_alone_margin}): Dense"
        return Decision(strategy=Strategy.DENSE, rule=PROBE_ALONE, reason=reason + " from the probe alone")

    def _common(self, available: Mapping[str, PlannedLane]) -> list[PlannedLane]:
        """Planned lanes that every strategy runs (besides the probe lane), and those that are not store lanes (web,
        news, ...): no decision can drop them (with ``probe_alone``, Dense may be the probe alone: no store lane)."""
        sets = [set(getattr(self.config.strategies, s.value)) for s in STRATEGY_ORDER]
        if self.config.probe_alone:
            sets.append({self.config.probe_lane})
        common = set.intersection(*sets) - {self.config.probe_lane}
        return [p for name, p in available.items() if (name in common or self._outside(name)) and p.stage == 1]

    def _outside(self, name: str) -> bool:
        """Whether lane ``name`` is outside the router's choice, so that it runs under every strategy: a lane no
        strategy of ``fabric/config/router.toml`` names (a lane added to ``fabric/config/lanes.toml`` is never dropped
        silently),
        or one that is not a store lane (web, news, ...)."""
        if all(name not in getattr(self.config.strategies, s.value) for s in STRATEGY_ORDER):
            return True
        lane = self.executor.lanes.get(name)
        return lane is not None and lane.kind not in STORE_KINDS

    async def run_probe(
        self,
        available: Mapping[str, PlannedLane],
        request: LaneRequest,
        deadline: float,
        embedder: Embedder | None,
        *,
        also: Sequence[PlannedLane] = (),
        distance: bool = True,
    ) -> Probe | None:
        """Run the probe lane (with ``also`` alongside) and compute its signals; None when it is not planned.

        The signals are computed as soon as the probe lane answers, while the lanes of ``also`` still run (they are
        slower than the vector lane as a rule), so that the decision costs no time on top of them. ``distance``:
        also embed the query and the probe's hits for the semantic distance (the classifier's input and the oracle
        labels'); the heuristic reads only the scores, and embedding ten hits costs a model run each when the
        content-hash cache does not hold them (about 600 ms a query on SciFact abstracts, measured)."""
        planned = available.get(self.config.probe_lane)
        if planned is None:
            return None
        stats = RunStats()  # one waiting window over both runs
        pending = (
            asyncio.ensure_future(self.executor.run(list(also), request, deadline=deadline, stats=stats))
            if also
            else None
        )
        try:
            outcome = (await self.executor.run([planned], request, deadline=deadline, stats=stats))[planned.name]
            signals, query_vector = await self._signals(outcome, request, embedder if distance else None)
            others = dict(await pending) if pending is not None else {}
        finally:
            if pending is not None and not pending.done():
                pending.cancel()
        return Probe(outcome=outcome, signals=signals, query_vector=query_vector, wait_ms=stats.wait_ms, others=others)

    async def _signals(
        self, outcome: LaneOutcome, request: LaneRequest, embedder: Embedder | None
    ) -> tuple[ProbeSignals | None, list[float] | None]:
        """The probe's signals and the query vector (None, None when the probe failed); no embedder: the scores'
        signals only (``dist`` None)."""
        if outcome.status is not LaneStatus.SUCCESS:
            return None, None
        top = outcome.hits[: self.config.probe_k]
        if embedder is None:
            return dataclasses.replace(compute_signals([h.score for h in top], None, []), dist=None), None
        query_vector: list[float] | None = None
        docs: list[list[float]] = []
        if top:
            try:
                texts = [request.query, *(f"{h.title} {h.text}".strip() for h in top)]
                vectors = await asyncio.to_thread(embedder.embed, texts)
                query_vector, docs = vectors[0], vectors[1:]
            except Exception as exc:  # the distance signal is then 1.0; routing goes on
                log.warning("router_probe_embed_failed", error=f"{type(exc).__name__}: {exc}")
        return compute_signals([h.score for h in top], query_vector, docs), query_vector

    def _classifier(self) -> RouterClassifier | None:
        if self.classifier is None and self._classifier_error is None:
            path = self.home / self.config.model_file
            try:
                from fabric.query.router.classifier import RouterClassifier

                self.classifier = RouterClassifier.load(path)
            except (ConfigError, ImportError) as exc:
                self._classifier_error = str(exc)
                log.warning("router_classifier_unavailable", error=str(exc))
        return self.classifier

    def _lanes_of(self, strategy: Strategy, available: Mapping[str, PlannedLane]) -> tuple[list[PlannedLane], str]:
        """The strategy's planned lanes, plus the planned lanes that are not store lanes (web, news, ...: the router
        chooses among the store lanes only, so they run as planned)."""
        wanted: tuple[str, ...] = getattr(self.config.strategies, strategy.value)
        lanes = [available[n] for n in wanted if n in available]
        if lanes:
            return lanes + [p for n, p in available.items() if n not in wanted and self._outside(n)], ""
        return list(available.values()), f"; no lane of {strategy.value} is planned, so every planned lane runs"

    def _graph_weighted(self, lanes: list[PlannedLane], request: SearchRequest) -> list[PlannedLane]:
        """Graph's lanes with ``graph_weight`` on those it adds to Dense (unless the request weighs them)."""
        weight = self.config.graph_weight
        if weight is None:
            return lanes
        added = set(self.config.strategies.graph) - set(self.config.strategies.dense) - set(request.weights or {})
        return [dataclasses.replace(p, weight=weight) if p.name in added else p for p in lanes]

    def _build(
        self,
        decision: Decision,
        chooser: str,
        request: SearchRequest,
        preflight: PreflightResult,
        available: Mapping[str, PlannedLane],
        filtered: LaneRequest,
        unfiltered: LaneRequest,
        probe: Probe | None,
        probs: Mapping[Strategy, float] | None,
    ) -> RoutedPlan:
        years = preflight.years if not preflight.bypassed else None
        no_years = decision.strategy is Strategy.TEMPORAL and years is None
        lanes, note = self._lanes_of(Strategy.DENSE if no_years else decision.strategy, available)
        if decision.rule == PROBE_ALONE:
            lanes = [p for p in lanes if p.name not in self.config.strategies.dense or p.name == self.config.probe_lane]
        elif decision.strategy is Strategy.GRAPH:
            lanes = self._graph_weighted(lanes, request)
        names = {p.name for p in lanes}
        lane_request = unfiltered
        done: dict[str, LaneOutcome] = {}
        extra: dict[str, Any] = {}
        reused = probe is not None and probe.outcome.lane in names
        if decision.strategy is Strategy.TEMPORAL and years is not None:
            hard = hard_years(filtered.constraints, years, self.config.temporal_depth)
            lane_request = dataclasses.replace(filtered, constraints=hard)
            if reused and probe is not None and probe.outcome.status is LaneStatus.SUCCESS:
                kept = filter_years(probe.outcome.hits, years)
                extra["probe_year_hits"] = len(kept)
                if len(kept) >= request.top_k:
                    done[probe.outcome.lane] = dataclasses.replace(probe.outcome, hits=tuple(kept))
                else:
                    extra["deep_fill"] = True  # too few in the probe: the lane runs again with the native filter
        elif decision.strategy is Strategy.TEMPORAL:
            note += "; no year range in the query, so no filter: Dense's lanes"
            if reused and probe is not None:
                done[probe.outcome.lane] = probe.outcome
        elif reused and probe is not None:
            done[probe.outcome.lane] = probe.outcome
        extra["probe_reused"] = bool(done)
        others = probe.others if probe is not None else {}
        if lane_request is unfiltered:  # lanes run with the probe are reusable unless a year filter now applies
            done.update((n, o) for n, o in others.items() if n in names)
        calls = (1 + len(others) if probe is not None else 0) + sum(1 for p in lanes if p.name not in done)
        record = RouteRecord(
            route=request.route,
            strategy=decision.strategy.value,
            chooser=chooser,
            rule=decision.rule,
            reason=decision.reason + note,
            lanes=tuple(p.name for p in lanes),
            lane_calls=calls,
            signals=probe.signals.to_dict() if probe is not None and probe.signals is not None else None,
            probabilities={s.value: v for s, v in probs.items()} if probs is not None else None,
            year_filter=lane_request.constraints.year_filter,
            extra=extra,
        )
        wait_ms = probe.wait_ms if probe is not None else 0.0
        return RoutedPlan(plan=lanes, lane_request=lane_request, done=done, record=record, wait_ms=wait_ms)
