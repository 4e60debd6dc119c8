"""Tests for fabric.core.models: the hot-path constructors of fused items and lane outcomes."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from fabric.core.models import FusedItem, Hit, LaneKind, LaneOutcome, LaneStatus, make_fused_item, make_lane_outcome


class TestMakeFusedItem:
    def test_equals_the_dataclass_constructor(self) -> None:
        """Filling the slots directly gives the same item as ``FusedItem(...)``."""
        hit = Hit(id="a", rank=1, score=2.0, title="T")
        args = {
            "hit": hit,
            "score_total": 0.5,
            "scores": {"rrf": 0.1, "fused": 0.2},
            "lanes": ("k", "v"),
            "ranks": {"k": 1, "v": 3},
            "stage_priority": 1,
            "merged_ids": ("b",),
        }
        fast = make_fused_item(**args)  # type: ignore[arg-type]
        assert fast == FusedItem(**args)  # type: ignore[arg-type]
        assert repr(fast) == repr(FusedItem(**args))  # type: ignore[arg-type]
        assert fast.to_dict() == FusedItem(**args).to_dict()  # type: ignore[arg-type]

    def test_still_frozen(self) -> None:
        """The item it builds is as immutable as any other."""
        item = make_fused_item(Hit(id="a", rank=1, score=1.0), 1.0, {}, (), {}, 0, ())
        with pytest.raises(dataclasses.FrozenInstanceError):
            item.score_total = 0.0  # type: ignore[misc]

    def test_fills_every_field(self) -> None:
        """The fast constructor takes every field, in declaration order (the order its slot setters run in)."""
        names = [f.name for f in dataclasses.fields(FusedItem)]
        assert list(inspect.signature(make_fused_item).parameters) == names
        item = make_fused_item(Hit(id="a", rank=1, score=1.0), 1.0, {}, (), {}, 0, ())
        for f in dataclasses.fields(FusedItem):
            getattr(item, f.name)  # an unfilled slot raises AttributeError


class TestMakeLaneOutcome:
    def test_equals_the_dataclass_constructor(self) -> None:
        """Filling the slots directly gives the same outcome as ``LaneOutcome(...)``, fields in declared order."""
        hits = (Hit(id="a", rank=1, score=2.0),)
        args = ("k", LaneKind.VECTOR, "prov", LaneStatus.FALLBACK, 12.5, hits, 0.5, "boom", "w", {"penalty": 0.5}, 0.8)
        names = [f.name for f in dataclasses.fields(LaneOutcome)]
        assert list(inspect.signature(make_lane_outcome).parameters) == names
        fast = make_lane_outcome(*args)
        slow = LaneOutcome(**dict(zip(names, args, strict=True)))  # type: ignore[arg-type]
        assert fast == slow
        assert fast.to_dict() == slow.to_dict()
        with pytest.raises(dataclasses.FrozenInstanceError):
            fast.weight = 1.0  # type: ignore[misc]
