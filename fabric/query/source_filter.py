"""The ``sources`` constraint as a hard filter on every lane's answer (the fusion policy's
``apply_source_constraints``).

The fusion policy appends ``site:`` operators to the query; here the bound :class:`~fabric.core.models.SourceFilter` is
applied
to the hits of every lane call by the executor, after the call and before fusion, so every lane (its fallback, the
router's probe and stage 2 included) is held to it, whatever its backend can filter:

- web, news and market lanes keep the hits whose domain is one of the filter's domains or a sub-domain of one
  (``edu`` keeps ``mit.edu``); a lane of one of the filter's lane kinds (news feeds for ``news``) keeps all;
- the stores (keyword, vector and graph lanes) keep the hits whose ``source_kind`` is one of the filter's kinds,
  and those whose domain matches as above.

Kept hits are re-ranked 1..n in lane order, as :func:`fabric.query.sanitize.sanitize_hits` leaves them.

A lane whose hits the filter may drop is asked for more than it would be (:func:`widen_request`:
``top_k`` × :data:`OVERFETCH_FACTOR`, at most :data:`OVERFETCH_MAX`, never below ``top_k``), and the kept hits are
cut back to the ``top_k`` of the original request, so filtered-out hits are made up for from deeper in the lane's
ranking instead of leaving the lane short. A lane whose kind the filter keeps whole (news feeds for ``news``) and
a request without a filter are sent as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from fabric.core.models import Hit, LaneKind, LaneRequest, SourceFilter

__all__ = [
    "OVERFETCH_FACTOR",
    "OVERFETCH_MAX",
    "STORE_KINDS",
    "domain_matches",
    "keeps",
    "restrict_sources",
    "widen_request",
]

OVERFETCH_FACTOR = 3
"""How many times ``top_k`` a lane is asked for when the ``sources`` filter may drop some of its hits."""
OVERFETCH_MAX = 100
"""Upper bound of a widened ``top_k`` (a request already above it is not widened, nor cut)."""

STORE_KINDS = frozenset({LaneKind.KEYWORD, LaneKind.VECTOR, LaneKind.GRAPH})
"""Lane kinds over the project's own stores, filtered by ``source_kind`` as well as by domain."""


def domain_matches(domain: str, domains: Sequence[str]) -> bool:
    """Whether ``domain`` (``www.`` ignored, any case) is one of ``domains`` or a sub-domain of one."""
    d = domain.lower().removeprefix("www.")
    return bool(d) and any(d == s or d.endswith("." + s) for s in domains)


def keeps(hit: Hit, lane_kind: LaneKind, flt: SourceFilter) -> bool:
    """Whether ``flt`` keeps ``hit`` returned by a lane of ``lane_kind`` (see the module docstring)."""
    if lane_kind in flt.lane_kinds or domain_matches(hit.domain, flt.domains):
        return True
    return lane_kind in STORE_KINDS and hit.source_kind in flt.kinds


def restrict_sources(hits: list[Hit], lane_kind: LaneKind, flt: SourceFilter | None) -> list[Hit]:
    """The hits ``flt`` keeps, re-ranked 1..n; ``hits`` itself when there is no filter."""
    if flt is None:
        return hits
    kept = [h for h in hits if keeps(h, lane_kind, flt)]
    return [h if h.rank == i else replace(h, rank=i) for i, h in enumerate(kept, start=1)]


def widen_request(request: LaneRequest, lane_kind: LaneKind) -> LaneRequest:
    """``request`` with ``top_k`` widened for the ``sources`` filter (see the module docstring), or itself when
    the filter is unset or keeps every hit of ``lane_kind``."""
    flt = request.constraints.source_filter
    if flt is None or lane_kind in flt.lane_kinds:
        return request
    top_k = max(request.top_k, min(request.top_k * OVERFETCH_FACTOR, OVERFETCH_MAX))
    return request if top_k == request.top_k else replace(request, top_k=top_k)
