"""Tests for fabric.models: the hot-path constructor of fused items."""

from __future__ import annotations

import dataclasses

import pytest

from fabric import models
from fabric.models import FusedItem, Hit, make_fused_item


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
        """A field added to FusedItem must be added to the fast constructor too."""
        assert len(models._FUSED_SET) == len(dataclasses.fields(FusedItem))
        item = make_fused_item(Hit(id="a", rank=1, score=1.0), 1.0, {}, (), {}, 0, ())
        for f in dataclasses.fields(FusedItem):
            getattr(item, f.name)  # an unfilled slot raises AttributeError
