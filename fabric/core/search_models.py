"""The engine's request and answer: :class:`SearchRequest`, :class:`PreflightResult` and :class:`SearchResult`.

Split from :mod:`fabric.core.models`, which re-exports every name here (import them from either module). At run time
this module imports only the standard library and :mod:`fabric.core.vocabulary`; the lane and fused item types it
holds are imported for type checking only, so :mod:`fabric.core.models` can import it without a cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fabric.core.checks import budget_ms, choice, page_size, query_text, weight
from fabric.core.errors import QueryError
from fabric.core.sources import Source, build_bibliography, document_id
from fabric.core.strategies import ROUTES
from fabric.core.vocabulary import EMPTY_MAPPING, Constraints, FusionMode, Mode

if TYPE_CHECKING:
    from fabric.core.models import FusedItem, LaneOutcome

__all__ = ["PreflightResult", "SearchRequest", "SearchResult"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchRequest:
    """A query to the engine, checked when it is built; the engine checks the settings' limits (query size,
    ``top_k`` ceiling, lane names) when it runs it. :func:`fabric.query.validation.parse_request` builds one from
    raw input (a CLI, HTTP or MCP request)."""

    query: str
    """The user's query text (non-empty, bounded size)."""
    mode: Mode = Mode.TECHNICAL
    """Selects per-lane budgets."""
    top_k: int = 10
    """Items per page."""
    cursor: str | None = None
    """Opaque cursor from a previous page."""
    constraints: Constraints = field(default_factory=Constraints)
    """User constraints, bound into lane parameters by the engine."""
    budget_ms: float | None = None
    """Optional total budget overriding the mode's; lanes never run past it."""
    strict: bool = False
    """When true, a partial answer (any planned lane not successful) is an error."""
    fusion: FusionMode | None = None
    """Fusion mode override; None uses config."""
    lanes: tuple[str, ...] | None = None
    """Restrict to these lanes; None runs every enabled lane."""
    preflight: bool = True
    """Whether pre-flight refinement may run."""
    weights: Mapping[str, float] | None = None
    """Per-request lane weights (lane name → weight), replacing the configured ones; None keeps config.

    Validation also accepts the components ``lexical`` / ``semantic`` / ``graph`` and expands them to the lanes
    of that kind. Part of the cursor's fingerprint, like ``fusion``.
    """
    route: str = ""
    """``all`` (every planned lane), ``auto`` (the router decides) or a strategy: ``dense``, ``temporal``,
    ``graph`` (see :mod:`fabric.query.router`); empty: the configured default route (``[router] default_route``,
    ``auto`` as shipped), the same default as the CLI, HTTP and MCP."""

    def __post_init__(self) -> None:
        """The checks that need no settings, with the message every door gives; strings are accepted for
        ``mode`` and ``fusion`` (``SearchRequest(query="x", mode="research")``).

        Raises:
            QueryError: (a ``ValueError``) naming the first bad field.
        """
        set_ = object.__setattr__
        set_(self, "query", query_text(self.query))
        if not isinstance(self.mode, Mode):
            set_(self, "mode", Mode(choice(self.mode, "mode", tuple(m.value for m in Mode))))
        if type(self.top_k) is not int or self.top_k < 1:
            set_(self, "top_k", page_size(self.top_k))
        if self.budget_ms is not None:
            set_(self, "budget_ms", budget_ms(self.budget_ms))
        if self.fusion is not None and not isinstance(self.fusion, FusionMode):
            set_(self, "fusion", FusionMode(choice(self.fusion, "fusion", tuple(m.value for m in FusionMode))))
        if self.route and self.route not in ROUTES:
            set_(self, "route", choice(self.route, "route", ROUTES))
        if self.lanes is not None and (isinstance(self.lanes, str) or not self.lanes):
            raise QueryError("lanes", "expected a non-empty list of lane names")
        for name, value in (self.weights or {}).items():
            weight(value, f"weights.{name}")
        if not isinstance(self.constraints, Constraints):
            raise QueryError("constraints", f"expected Constraints, got {type(self.constraints).__name__}")


@dataclass(frozen=True, slots=True, kw_only=True)
class PreflightResult:
    """What pre-flight did to the query."""

    bypassed: bool
    """True when refinement did not run (or did not finish in its budget)."""
    reason: str | None = None
    """Why it was bypassed."""
    refined_query: str = ""
    """The query the lanes received."""
    latency_ms: float = 0.0
    """Time spent in pre-flight."""
    years: tuple[int, int] | None = None
    """Year range extracted from the query, if any."""
    sites: tuple[str, ...] = ()
    """Domains from ``site:`` operators."""
    phrases: tuple[str, ...] = ()
    """Quoted phrases."""
    intent: str | None = None
    """Scenario class: temporal, relational or factual."""

    def to_dict(self) -> dict[str, Any]:
        """The pre-flight section of the result JSON."""
        return {
            "bypassed": self.bypassed,
            "reason": self.reason,
            "refined_query": self.refined_query,
            "latency_ms": round(self.latency_ms, 3),
            "years": list(self.years) if self.years else None,
            "sites": list(self.sites),
            "phrases": list(self.phrases),
            "intent": self.intent,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchResult:
    """The engine's answer: items, per-lane outcomes, pre-flight, dedup counts, timings, receipt."""

    query: str
    mode: Mode
    trace_id: str
    items: tuple[FusedItem, ...]
    lanes: Mapping[str, LaneOutcome]
    preflight: PreflightResult
    next_cursor: str | None = None
    partial: bool = False
    dedup: Mapping[str, int] = field(default_factory=lambda: EMPTY_MAPPING)
    timings: Mapping[str, float] = field(default_factory=lambda: EMPTY_MAPPING)
    stages: Mapping[str, Any] = field(default_factory=lambda: EMPTY_MAPPING)
    fusion_mode: FusionMode = FusionMode.RRF
    route: Mapping[str, Any] = field(default_factory=lambda: EMPTY_MAPPING)
    """How the query was routed (``fabric.core.strategies.RouteRecord.to_dict``)."""
    total: int = 0
    """Matching entries: the fused candidate set before paging (the API contract's "Found N entries")."""
    contributions: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: EMPTY_MAPPING)
    """Item id → each lane kind's and factor's part of its ``score_total`` (:mod:`fabric.query.contributions`)."""
    budget: Mapping[str, Any] = field(default_factory=lambda: EMPTY_MAPPING)
    """The ``cost`` token budget's record (``max_tokens``, ``tokens``, ``truncated``, ``deferred``); empty
    when no ``cost`` was given."""
    citations: Mapping[str, Mapping[str, Any] | None] | None = None
    """With ``citations_required``: item id → its citation-ready passage, or None for an item without one
    (:func:`fabric.query.answer_limits.citation_passages`); None when citations were not required."""

    def item_dict(self, item: FusedItem) -> dict[str, Any]:
        """One item's JSON: ``FusedItem.to_dict()`` plus the API contract's ``score_lexical`` / ``score_semantic`` /
        ``score_graph`` (each lane kind's contribution to ``score_total``), every ``contributions`` part and the
        passage's full ``text`` (``snippet`` is cut at 300 characters).

        The raw lane scores stay under ``scores.lexical`` / ``scores.semantic`` / ``scores.graph``.
        """
        parts = self.contributions.get(item.id, EMPTY_MAPPING)
        out = item.to_dict()
        out["text"] = item.hit.text
        for comp in ("lexical", "semantic", "graph"):
            out[f"score_{comp}"] = round(parts.get(comp, 0.0), 6)
        out["contributions"] = {k: round(v, 6) for k, v in parts.items()}
        if self.citations is not None:
            cite = self.citations.get(item.id)
            out["citation"] = dict(cite) if cite is not None else None
        if item.id in self.budget.get("truncated", ()):
            out["truncated"] = True
        return out

    def citation_summary(self) -> dict[str, Any]:
        """``required``, how many page items are ``citable`` and the ids of the ``uncited`` ones."""
        if self.citations is None:
            return {"required": False}
        uncited = [it.id for it in self.items if self.citations.get(it.id) is None]
        return {"required": True, "citable": len(self.items) - len(uncited), "uncited": uncited}

    def bibliography(self) -> tuple[Source, ...]:
        """Every source document of the page (:mod:`fabric.core.sources`); with ``citations_required`` the cited
        ones carry their citation's marker and passage (as excerpt), else none is cited."""
        markers: dict[str, int] = {}
        excerpts: dict[str, str] = {}
        for it in self.items:
            cite = (self.citations or EMPTY_MAPPING).get(it.id)
            if cite is not None:
                markers.setdefault(document_id(it.hit), int(cite["marker"]))
                excerpts.setdefault(document_id(it.hit), str(cite["passage"]))
        return build_bibliography([it.hit for it in self.items], markers, excerpts)

    def receipt(self, per_lane: int = 10) -> dict[str, Any]:
        """Per-lane top-k ids with native scores, and the fused ranking with totals (the docs-memory policy's
        receipts)."""
        return {
            "lanes": {
                name: [[h.id, round(h.score, 6)] for h in out.hits[:per_lane]] for name, out in self.lanes.items()
            },
            "fused": [[it.id, round(it.score_total, 6)] for it in self.items],
        }

    def to_dict(self) -> dict[str, Any]:
        """The result JSON shared by the CLI (``--json``) and ``POST /v1/search``."""
        return {
            "query": self.query,
            "mode": self.mode.value,
            "trace_id": self.trace_id,
            "partial": self.partial,
            "fusion_mode": self.fusion_mode.value,
            "total": self.total,
            "items": [self.item_dict(it) for it in self.items],
            "next_cursor": self.next_cursor,
            "lanes": {name: out.to_dict() for name, out in self.lanes.items()},
            "preflight": self.preflight.to_dict(),
            "dedup": dict(self.dedup),
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
            "stages": dict(self.stages),
            "route": dict(self.route),
            "budget": dict(self.budget),
            "citations": self.citation_summary(),
            "bibliography": [source.to_dict() for source in self.bibliography()],
            "receipt": self.receipt(),
        }
