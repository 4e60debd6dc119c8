"""Tests for fabric.core.vocabulary: parsing the closed value sets, the UTC timestamp format, re-export by models."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

import fabric.core.models
import fabric.core.vocabulary
from fabric.core.vocabulary import LaneKind, Mode, iso_utc


class TestFromStr:
    def test_case_and_spaces_are_ignored(self) -> None:
        """`` Research `` parses as the research mode."""
        assert Mode.from_str(" Research ") is Mode.RESEARCH

    def test_unknown_value_lists_the_valid_ones(self) -> None:
        """An unknown value raises ValueError naming the enum and every valid value."""
        with pytest.raises(ValueError, match=r"unknown LaneKind 'forum'; valid: keyword, vector, graph, web"):
            LaneKind.from_str("forum")


class TestIsoUtc:
    def test_offset_times_are_converted_to_utc(self) -> None:
        """A +02:00 time prints as the same instant in UTC with a ``Z``."""
        value = datetime(2026, 3, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
        assert iso_utc(value) == "2026-03-01T10:00:00Z"

    def test_naive_times_are_taken_as_utc(self) -> None:
        """A naive datetime is read as UTC."""
        assert iso_utc(datetime(2026, 3, 1, 12, 0)) == "2026-03-01T12:00:00Z"

    def test_none_stays_none(self) -> None:
        """No date gives no string."""
        assert iso_utc(None) is None


def test_models_re_exports_every_name() -> None:
    """``from fabric.core.models import Mode`` and friends keep working: the same objects."""
    for name in fabric.core.vocabulary.__all__:
        assert getattr(fabric.core.models, name) is getattr(fabric.core.vocabulary, name)
        assert name in fabric.core.models.__all__
