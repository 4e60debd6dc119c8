"""Tests for fusion.types: the lazily frozen FusedItems sequence and the public names."""

from __future__ import annotations

import pytest

from fabric.core.models import FusedItem
from fusion import types
from fusion.pipeline import fuse
from fusion.types import FusedItems
from tests.fusion.conftest import context, lane, outcomes


def items() -> FusedItems:
    """Three fused items x, y, z."""
    out = fuse(outcomes(lane("a", ["x", "y", "z"])), context())
    assert isinstance(out.items, FusedItems)
    return out.items


class TestFusedItems:
    def test_public_api(self) -> None:
        """The module exports the context, output, run, candidate, stage and sequence types."""
        assert sorted(types.__all__) == [
            "Candidates", "FusedItems", "FusionContext", "FusionOutput", "FusionRun", "LaneInfo", "Stage",
        ]  # fmt: skip

    def test_slice_is_tuple(self) -> None:
        """A slice (one page) is a tuple of FusedItem."""
        page = items()[0:2]
        assert isinstance(page, tuple)
        assert [it.id for it in page] == ["x", "y"]

    def test_index_and_negative_index(self) -> None:
        """Integer and negative indices work like a tuple's."""
        seq = items()
        assert (seq[0].id, seq[-1].id, len(seq)) == ("x", "z", 3)

    def test_out_of_range(self) -> None:
        """An index past the end raises IndexError."""
        with pytest.raises(IndexError):
            items()[3]

    def test_items_cached(self) -> None:
        """Reading an item twice returns the same frozen object."""
        seq = items()
        assert seq[1] is seq[1]
        assert isinstance(seq[1], FusedItem)

    def test_equal_to_tuple(self) -> None:
        """The sequence equals the tuple of its items."""
        seq = items()
        assert seq == tuple(seq)
        assert "3 items" in repr(seq)
