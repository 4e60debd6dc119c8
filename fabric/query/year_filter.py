"""The temporal route's year filter (the router policy's TemporalRAG, seed 004 §4B): deep, and honest.

When the router runs Temporal with the query's year range, the lanes get :func:`hard_years`'s constraints: the
range as the soft ``query_years`` preference (the store lanes rank the items of those years, or undated, ahead of
the rest, over the whole store) and as the hard ``year_filter``, and every lane is asked for ``year_depth`` hits
(``[router] temporal_depth``, :func:`widen_for_years`). The executor then holds every lane's answer to the range
(:func:`restrict_years`): an item passes when a year it mentions or its publication year is in the range, or when it
is undated and mentions no year (nothing says it is of another time: a corpus without dates still answers). An
item dated outside the range never pads the page; when the fused answer holds fewer items than asked, the
result's ``route`` says so (``temporal_shortfall``, :func:`shortfall`).

Why undated items pass: a hard range on dates alone left a collection without dates (CISI's abstracts) with an
empty answer for a question that merely says "in 1979" (measured: one of its 76 queries lost its whole answer,
CISI nDCG@10 0.4618 -> 0.4547); the pre-flight's soft years always kept undated items for the same reason.

Soft years (``query_years`` alone: a year inferred from a query that is *not* routed Temporal) stay soft: items of
those years first, then the rest (:func:`lanes.sqlite_common.deep_fill`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fabric.core.models import BoundConstraints, Hit, LaneRequest

__all__ = ["hard_years", "lane_native", "matches", "restrict_years", "shortfall", "widen_for_years"]


def matches(hit: Hit, years: tuple[int, int]) -> bool:
    """Whether ``hit`` may answer a query of ``years``: it mentions a year in them (``metadata["years"]``, which
    holds the publication year of a stored chunk) or was published in one, or it is undated and mentions no year."""
    lo, hi = sorted(years)
    mentioned = hit.metadata.get("years") or ([hit.published_at.year] if hit.published_at else [])
    return not mentioned or any(lo <= int(y) <= hi for y in mentioned)


def restrict_years(hits: list[Hit], years: tuple[int, int] | None) -> list[Hit]:
    """The hits in ``years``, re-ranked 1..n; ``hits`` itself when there is no filter or every hit passes."""
    if years is None:
        return hits
    kept = [h for h in hits if matches(h, years)]
    if len(kept) == len(hits):
        return hits
    return [h if h.rank == i else replace(h, rank=i) for i, h in enumerate(kept, start=1)]


def hard_years(constraints: BoundConstraints, years: tuple[int, int], depth: int) -> BoundConstraints:
    """``constraints`` with ``years`` as the lanes' preference (``query_years``) and the executor's filter
    (``year_filter``, every lane asked ``depth`` hits); a ``time_range``'s date bounds stay as they are."""
    lo, hi = sorted(years)
    return replace(constraints, query_years=(lo, hi), year_filter=(lo, hi), year_depth=depth)


def widen_for_years(request: LaneRequest, native: bool = False) -> LaneRequest:
    """``request`` with ``top_k`` raised to the year filter's depth, or itself. ``native`` (a lane that ranks the
    years' items first over its whole store, ``year_filter_native``) changes nothing: its deep ranking is still
    what the executor's filter leaves items in, so every lane is asked as deep."""
    c = request.constraints
    if c.year_filter is None or c.year_depth <= request.top_k:
        return request
    return replace(request, top_k=c.year_depth)


def shortfall(constraints: BoundConstraints | None, found: int, wanted: int) -> dict[str, Any] | None:
    """The ``temporal_shortfall`` record when a year-filtered answer holds fewer than ``wanted`` items, or None."""
    if constraints is None or constraints.year_filter is None or found >= wanted:
        return None
    return {"found": found, "k": wanted, "years": list(constraints.year_filter), "depth": constraints.year_depth}


def lane_native(lane: object) -> bool:
    """Whether ``lane`` applies a hard year range itself (``year_filter_native``)."""
    return bool(getattr(lane, "year_filter_native", False))
