"""Prometheus metrics of one engine, in its own :class:`~prometheus_client.CollectorRegistry`.

The fusion policy's monitoring table is computable from them (:meth:`EngineMetrics.summary`):

- lane success rate = ``fabric_lane_outcomes_total{status="success"}`` / all lane outcomes;
- deduplication rate = ``fabric_dedup_removed_total`` / ``fabric_dedup_candidates_total``;
- response time = ``fabric_query_latency_seconds`` (histogram: mean, buckets for quantiles);
- fusion-quality proxy = ``fabric_lane_agreement`` (histogram, per query with two or more lanes returning hits):
  the mean over lane pairs of the overlap of their top 10 ids, ``|A ∩ B| / min(10, |A|, |B|)``;
- empty-answer rate = ``fabric_empty_answers_total`` / ``fabric_queries_total`` (no lane returned a hit);
- citation coverage = ``fabric_citation_sentences_total{supported="true"}`` / all aligned sentences (fed by
  :meth:`EngineMetrics.observe_citations` wherever citations are aligned for a client: ``POST /v1/cite``).

Per tenant (the API contract's asks for them; the service observes each answer with the caller's tenant,
:meth:`EngineMetrics.observe_answer`):

- ``fabric_tenant_answers_total{tenant, outcome="answered"|"empty"}``: empty-answer rate per tenant;
- ``fabric_tenant_lane_agreement{tenant}``: the fusion-quality proxy above, per tenant;
- ``fabric_top_score_mass{tenant}`` (histogram): the share of the answer's top-10 ``score_total`` mass held by its
  first 3 items, a hit-quality proxy (near 1: a few clear winners; near 0.3: a flat, undecided list);
- ``fabric_tenant_citation_sentences_total{tenant, supported}``: citation coverage per tenant;
- ``fabric_mutations_total{tenant, op="ingest"|"delete", outcome="success"|"failure"|"conflict"}``: mutation
  success rate;
- ``fabric_conflicts_total{tenant, kind}``: conflict incidence: ``id_collision`` (ids another source holds, each
  id counted), ``concurrent_update`` (chunks a run found mid-write by another run: pending in the ledger),
  ``idempotency_key`` (a key reused with a different body) and ``provenance`` (ids a writer key may not replace or
  delete, each id counted: :mod:`fabric.ingest.provenance`).

The API contract and the fusion policy give no thresholds for the per-tenant, mutation and conflict series, so no alert
rule uses them.

``deploy/prometheus/alerts.yml`` alerts on these series.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from itertools import combinations
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from fabric import __version__
from fabric.core.models import LaneOutcome, SearchResult
from fusion.types import FusionOutput

__all__ = [
    "EngineMetrics",
    "lane_agreement",
    "process_series",
    "revision",
    "top_score_mass",
]

_AGREEMENT_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
_TOP = 10
_MASS_HEAD = 3
_MASS_BUCKETS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.3, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0)
"""Seconds; 0.3 (the API contract: p95 < 300 ms) and 3.0 (the fusion policy: response time > 3 s) are bucket bounds."""


def lane_agreement(outcomes: Mapping[str, LaneOutcome]) -> float | None:
    """Mean over lane pairs of ``|A ∩ B| / min(10, |A|, |B|)`` of their top-10 ids (None under two lanes with hits)."""
    tops = [{h.id for h in out.hits[:_TOP]} for out in outcomes.values() if out.hits]
    if len(tops) < 2:
        return None
    pairs = [len(a & b) / min(_TOP, len(a), len(b)) for a, b in combinations(tops, 2)]
    return sum(pairs) / len(pairs)


def top_score_mass(scores: Sequence[float]) -> float | None:
    """The share of the top-10 score mass held by the first 3 (None for no items or no positive mass)."""
    top = [max(0.0, s) for s in scores[:_TOP]]
    total = sum(top)
    return sum(top[:_MASS_HEAD]) / total if total > 0 else None


def revision() -> str:
    """The source revision this build came from (``FABRIC_REVISION``, set by the image build), else ``unknown``."""
    return os.environ.get("FABRIC_REVISION", "").strip() or "unknown"


def process_series(registry: CollectorRegistry) -> None:
    """The process's CPU, memory and descriptors (``process_*``), the interpreter and its collector
    (``python_*``) and ``fabric_build_info{version, revision}``, in ``registry``."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    Info("fabric_build", "The running build", registry=registry).info({"version": __version__, "revision": revision()})


class EngineMetrics:
    """Counters, gauges and histograms of one engine instance (never the global registry)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        process_series(r)
        self.lane_outcomes = Counter("fabric_lane_outcomes", "Lane outcomes", ["lane", "status"], registry=r)
        self.lane_latency = Histogram(
            "fabric_lane_latency_seconds", "Lane latency", ["lane"], buckets=_LATENCY_BUCKETS, registry=r
        )
        self.query_latency = Histogram(
            "fabric_query_latency_seconds", "Query latency", buckets=_LATENCY_BUCKETS, registry=r
        )
        self.queries = Counter("fabric_queries", "Queries answered", registry=r)
        self.partial = Counter("fabric_partial_answers", "Answers with a lane not successful", registry=r)
        self.dedup_candidates = Counter("fabric_dedup_candidates", "Hits entering fusion", registry=r)
        self.dedup_removed = Counter("fabric_dedup_removed", "Duplicates removed by fusion", registry=r)
        self.suspended = Gauge("fabric_provider_suspended", "1 while a provider is suspended", ["provider"], registry=r)
        self.abandoned = Counter("fabric_abandoned_tasks", "Lane calls abandoned past their deadline", registry=r)
        self.penalty = Gauge(
            "fabric_provider_penalty", "Provider fusion weight factor in (0, 1]", ["provider"], registry=r
        )
        self.failure_rate = Gauge(
            "fabric_provider_failure_rate", "Failure share of the provider's recent calls", ["provider"], registry=r
        )
        self._outcome_children: dict[tuple[str, str], Any] = {}
        self._latency_children: dict[str, Any] = {}
        self._provider_children: dict[str, tuple[Any, Any, Any]] = {}
        self._provider_values: dict[str, tuple[float, float, float]] = {}
        self.agreement = Histogram(
            "fabric_lane_agreement", "Top-10 overlap between lanes (fusion-quality proxy)",
            buckets=_AGREEMENT_BUCKETS, registry=r,
        )  # fmt: skip
        self.empty = Counter("fabric_empty_answers", "Queries where no lane returned a hit", registry=r)
        self.citations = Counter(
            "fabric_citation_sentences", "Answer sentences aligned with passages", ["supported"], registry=r
        )
        self.abandoned_running = Gauge(
            "fabric_abandoned_tasks_running", "Abandoned lane calls still running", registry=r
        )
        self.uncharged_timeouts = Counter(
            "fabric_lane_uncharged_timeouts",
            "Lane timeouts spent mostly waiting in this process, not charged to the provider's health",
            ["provider"],
            registry=r,
        )
        self._tenant_series(r)

    def _tenant_series(self, r: CollectorRegistry) -> None:
        self.tenant_answers = Counter(
            "fabric_tenant_answers", "Answers per tenant, empty or not", ["tenant", "outcome"], registry=r
        )
        self.tenant_agreement = Histogram(
            "fabric_tenant_lane_agreement", "Top-10 overlap between lanes per tenant", ["tenant"],
            buckets=_AGREEMENT_BUCKETS, registry=r,
        )  # fmt: skip
        self.top_score_mass = Histogram(
            "fabric_top_score_mass", "Share of the top-10 score mass held by the first 3 items", ["tenant"],
            buckets=_MASS_BUCKETS, registry=r,
        )  # fmt: skip
        self.tenant_citations = Counter(
            "fabric_tenant_citation_sentences", "Aligned answer sentences per tenant", ["tenant", "supported"],
            registry=r,
        )  # fmt: skip
        self.mutations = Counter(
            "fabric_mutations", "Store mutations by outcome", ["tenant", "op", "outcome"], registry=r
        )
        self.conflicts = Counter("fabric_conflicts", "Conflicts met by mutations", ["tenant", "kind"], registry=r)

    def observe_lanes(self, outcomes: Mapping[str, LaneOutcome]) -> None:
        """Count each lane outcome and its latency (label children are cached: this runs per query)."""
        for name, out in outcomes.items():
            key = (name, out.status.value)
            counter = self._outcome_children.get(key)
            if counter is None:
                counter = self._outcome_children[key] = self.lane_outcomes.labels(*key)
            counter.inc()
            hist = self._latency_children.get(name)
            if hist is None:
                hist = self._latency_children[name] = self.lane_latency.labels(name)
            hist.observe(out.latency_ms / 1000.0)

        self._observe_agreement(outcomes)

    def _observe_agreement(self, outcomes: Mapping[str, LaneOutcome]) -> None:
        """Empty answers and the lanes' top-10 agreement of one query."""
        value = lane_agreement(outcomes)
        if value is None and not any(out.hits for out in outcomes.values()):
            self.empty.inc()
        elif value is not None:
            self.agreement.observe(value)

    def observe_answer(self, tenant: str, result: SearchResult) -> None:
        """Per-tenant hit-quality proxies of one answer: empty or not, lane agreement, top-score mass."""
        answered = any(out.hits for out in result.lanes.values())
        self.tenant_answers.labels(tenant, "answered" if answered else "empty").inc()
        agreement = lane_agreement(result.lanes)
        if agreement is not None:
            self.tenant_agreement.labels(tenant).observe(agreement)
        mass = top_score_mass([it.score_total for it in result.items])
        if mass is not None:
            self.top_score_mass.labels(tenant).observe(mass)

    def observe_citations(self, *, supported: int, total: int, tenant: str | None = None) -> None:
        """Count aligned answer sentences: ``supported`` of ``total`` had at least one citing passage."""
        if not 0 <= supported <= total:
            raise ValueError(f"expected 0 <= supported <= total, got {supported} of {total}")
        self.citations.labels("true").inc(supported)
        self.citations.labels("false").inc(total - supported)
        if tenant is not None:
            self.tenant_citations.labels(tenant, "true").inc(supported)
            self.tenant_citations.labels(tenant, "false").inc(total - supported)

    def observe_mutation(self, tenant: str, op: str, outcome: str, conflicts: Mapping[str, int] | None = None) -> None:
        """Count one mutation (``op`` ingest or delete; ``outcome`` success, failure or conflict) and the
        conflicts it met, by kind."""
        self.mutations.labels(tenant, op, outcome).inc()
        for kind, n in (conflicts or {}).items():
            if n:
                self.conflicts.labels(tenant, kind).inc(n)

    def set_provider(self, provider: str, *, suspended: bool, health: Mapping[str, Any]) -> None:
        """Export one provider's state: the suspended gauge, penalty factor and failure rate (runs per lane per
        query, so the label children are cached and a gauge is only written when its value changed)."""
        values = (
            1.0 if suspended else 0.0,
            float(health.get("penalty", 1.0)),
            float(health.get("failure_rate", 0.0)),
        )
        if self._provider_values.get(provider) == values:
            return
        children = self._provider_children.get(provider)
        if children is None:
            children = self._provider_children[provider] = (
                self.suspended.labels(provider),
                self.penalty.labels(provider),
                self.failure_rate.labels(provider),
            )
        for gauge, value in zip(children, values, strict=True):
            gauge.set(value)
        self._provider_values[provider] = values

    def observe_search(
        self,
        outcomes: Mapping[str, LaneOutcome],
        fused: FusionOutput,
        *,
        total_ms: float,
        partial: bool,
        suspended: Callable[[str], bool],
    ) -> None:
        """One answered query: its lanes, its totals (``fused``: the fusion output's ``candidates`` and ``removed``)
        and each provider's health (``suspended(provider)``: whether the penalties suspend it)."""
        self.observe_lanes(outcomes)
        self.observe_query(total_ms=total_ms, partial=partial, candidates=fused.candidates, removed=fused.removed)
        for out in outcomes.values():
            self.set_provider(out.provider, suspended=suspended(out.provider), health=out.health)

    def observe_query(self, *, total_ms: float, partial: bool, candidates: int, removed: int) -> None:
        """Count one answered query."""
        self.queries.inc()
        self.query_latency.observe(total_ms / 1000.0)
        if partial:
            self.partial.inc()
        self.dedup_candidates.inc(candidates)
        self.dedup_removed.inc(removed)

    def _value(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        value = self.registry.get_sample_value(name, dict(labels or {}))
        return float(value or 0.0)

    def summary(self) -> dict[str, Any]:
        """The fusion policy's monitoring table: lane success rate, dedup rate, mean response time, partial share.

        A lane skipped by design (a staged fill lane when the first stage sufficed) is neither a success nor a
        failure: it is left out of the success rate, as the alert leaves it out."""
        total = success = 0.0
        for metric in self.lane_outcomes.collect():
            for s in metric.samples:
                if s.name.endswith("_total") and s.labels.get("status") != "skipped":
                    total += s.value
                    if s.labels.get("status") == "success":
                        success += s.value
        queries = self._value("fabric_queries_total")
        candidates = self._value("fabric_dedup_candidates_total")
        count = self._value("fabric_query_latency_seconds_count")
        return {
            "queries": int(queries),
            "lane_success_rate": round(success / total, 4) if total else None,
            "dedup_rate": round(self._value("fabric_dedup_removed_total") / candidates, 4) if candidates else None,
            "response_time_mean_ms": round(1000 * self._value("fabric_query_latency_seconds_sum") / count, 3)
            if count
            else None,
            "partial_share": round(self._value("fabric_partial_answers_total") / queries, 4) if queries else None,
            "abandoned_tasks": int(self._value("fabric_abandoned_tasks_total")),
            "empty_answer_rate": round(self._value("fabric_empty_answers_total") / queries, 4) if queries else None,
            "lane_agreement_mean": self._mean("fabric_lane_agreement"),
        }

    def _mean(self, histogram: str) -> float | None:
        count = self._value(f"{histogram}_count")
        return round(self._value(f"{histogram}_sum") / count, 4) if count else None

    def exposition(self) -> bytes:
        """The Prometheus text exposition of this engine's registry."""
        return generate_latest(self.registry)
