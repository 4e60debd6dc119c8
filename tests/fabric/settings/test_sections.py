"""Tests for fabric.settings.sections: the settings' section dataclasses, their defaults and typed building."""

from __future__ import annotations

import dataclasses

import pytest

import fabric.settings
import fabric.settings.sections
from fabric.core.errors import ConfigError
from fabric.core.models import FusionMode, LaneKind
from fabric.settings.readers import build
from fabric.settings.sections import FactorWeights, FusionConfig, LaneConfig, ModeConfig


def test_config_re_exports_every_name() -> None:
    """``from fabric.settings import LaneConfig`` keeps working: the same objects."""
    for name in fabric.settings.sections.__all__:
        assert getattr(fabric.settings, name) is getattr(fabric.settings.sections, name)
        assert name in fabric.settings.__all__


def test_factor_weights_follow_seed_003() -> None:
    """The ranking factors default to 50/20/15/10/5 and sum to one."""
    w = FactorWeights()
    assert (w.rrf, w.domain_diversity, w.recency, w.authority, w.quality) == (0.5, 0.2, 0.15, 0.1, 0.05)
    assert sum(dataclasses.astuple(w)) == pytest.approx(1.0)


def test_sections_are_frozen() -> None:
    """A section cannot be mutated after loading."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        ModeConfig().total_budget_ms = 1.0  # type: ignore[misc]


def test_build_resolves_the_annotations() -> None:
    """Enums and nested sections are built from TOML values through the annotations of this module."""
    fc: FusionConfig = build(FusionConfig, {"mode": "score_dbsf", "factors": {"rrf": 0.6}}, "f.toml", "fusion")
    assert fc.mode is FusionMode.SCORE_DBSF
    assert fc.factors.rrf == 0.6
    lane: LaneConfig = build(LaneConfig, {"kind": "keyword", "backend": "sqlite_fts"}, "l.toml", "lanes.k", name="k")
    assert (lane.kind, lane.stage, lane.weight) == (LaneKind.KEYWORD, 1, 1.0)


def test_unknown_key_names_the_section() -> None:
    """An unknown key is a ConfigError naming the dotted key."""
    with pytest.raises(ConfigError, match="fusion"):
        build(FusionConfig, {"nope": 1}, "f.toml", "fusion")
