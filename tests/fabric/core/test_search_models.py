"""Tests for fabric.core.search_models: the engine's request and answer, and their JSON."""

from __future__ import annotations

import dataclasses
import re

import pytest

import fabric.core.models
import fabric.core.search_models
from fabric.core.models import FusionMode, LaneKind, LaneStatus, Mode, make_fused_item, make_lane_outcome
from fabric.core.search_models import PreflightResult, SearchRequest, SearchResult
from lanes.fake import synthetic_hits


def result() -> SearchResult:
    hits = synthetic_hits("a", 2)
    items = tuple(make_fused_item(h, 1.0 / h.rank, {"a": h.score}, ("a",), {"a": h.rank}, 0, ()) for h in hits)
    lane = make_lane_outcome("a", LaneKind.KEYWORD, "pa", LaneStatus.SUCCESS, 1.5, tuple(hits), 1.0, None, None, {})
    return SearchResult(
        query="q",
        mode=Mode.TECHNICAL,
        trace_id="t",
        items=items,
        lanes={"a": lane},
        preflight=PreflightResult(bypassed=False, refined_query="q", years=(2020, 2021)),
        contributions={"a-0": {"lexical": 0.25}},
        total=2,
    )


def test_models_re_exports_every_name() -> None:
    """``from fabric.core.models import SearchResult`` keeps working: the same objects."""
    for name in fabric.core.search_models.__all__:
        assert getattr(fabric.core.models, name) is getattr(fabric.core.search_models, name)
        assert name in fabric.core.models.__all__


def test_request_defaults_and_frozen() -> None:
    """A request has the documented defaults (route: the configured default, as every door) and cannot be mutated."""
    req = SearchRequest(query="q")
    assert (req.mode, req.top_k, req.route, req.strict, req.lanes) == (Mode.TECHNICAL, 10, "", False, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.query = "other"  # type: ignore[misc]


def test_preflight_to_dict_lists_years() -> None:
    """Years become a list; a missing range stays None."""
    assert PreflightResult(bypassed=False, years=(2020, 2021)).to_dict()["years"] == [2020, 2021]
    assert PreflightResult(bypassed=True, reason="budget").to_dict()["years"] is None


def test_result_to_dict_carries_items_lanes_and_receipt() -> None:
    """The result JSON holds items with per-kind scores, lane outcomes and the receipt."""
    out = result().to_dict()
    assert [it["id"] for it in out["items"]] == ["a-0", "a-1"]
    assert out["items"][0]["score_lexical"] == 0.25
    assert out["items"][1]["score_lexical"] == 0.0
    assert out["items"][0]["text"] == "text a 0"
    assert out["lanes"]["a"]["status"] == "success"
    assert out["receipt"]["fused"] == [["a-0", 1.0], ["a-1", 0.5]]
    assert out["total"] == 2
    assert out["preflight"]["years"] == [2020, 2021]


def test_receipt_cuts_each_lane() -> None:
    """``receipt(per_lane)`` keeps the top ids of each lane with their native scores."""
    assert result().receipt(per_lane=1)["lanes"] == {"a": [["a-0", 1.0]]}


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"query": ""}, "query", "must not be empty or whitespace only"),
        ({"query": "   "}, "query", "must not be empty or whitespace only"),
        ({"query": "\udcff"}, "query", "not valid UTF-8 (lone surrogate at character 0)"),
        ({"query": "x", "top_k": 0}, "top_k", "must be >= 1, got 0"),
        ({"query": "x", "top_k": -1}, "top_k", "must be >= 1, got -1"),
        ({"query": "x", "top_k": True}, "top_k", "expected an integer, got True"),
        ({"query": "x", "budget_ms": float("nan")}, "budget_ms", "must be > 0, got nan"),
        ({"query": "x", "mode": "fastest"}, "mode", "unknown value 'fastest'"),
        ({"query": "x", "fusion": "magic"}, "fusion", "unknown value 'magic'"),
        ({"query": "x", "route": "sideways"}, "route", "unknown value 'sideways'"),
        ({"query": "x", "lanes": "keyword"}, "lanes", "expected a non-empty list of lane names"),
        ({"query": "x", "weights": {"keyword": float("inf")}}, "weights.keyword", "expected a number in [0, 100]"),
    ],
)
def test_a_request_is_checked_when_built(fields: dict[str, object], field: str, message: str) -> None:
    """Built in code, a request refuses what every door refuses, naming the field (a ValueError)."""
    with pytest.raises(ValueError, match=re.escape(f"{field}: {message}")) as caught:
        SearchRequest(**fields)  # type: ignore[arg-type]
    assert caught.value.field == field  # type: ignore[attr-defined]


def test_strings_are_accepted_for_mode_and_fusion() -> None:
    """A script may name the mode and the fusion as strings."""
    req = SearchRequest(query="x", mode="research", fusion="rrf", route="auto")
    assert (req.mode, req.fusion, req.route) == (Mode.RESEARCH, FusionMode.RRF, "auto")
