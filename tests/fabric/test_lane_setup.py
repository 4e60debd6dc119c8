"""Tests for fabric.lane_setup: building the configured lanes, the fail-open embedder warm-up."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from fabric.config import LaneConfig
from fabric.lane_setup import build_lanes, warm_embedder
from fabric.models import LaneKind
from lanes.base import LaneResources
from tests.support.settings import make_settings


class CountingEmbedder:
    """Counts ``warm`` calls; ``fail`` makes warming raise."""

    name = "counting"
    dim = 2

    def __init__(self, fail: bool = False) -> None:
        self.warmed = 0
        self.fail = fail

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]

    def warm(self) -> None:
        self.warmed += 1
        if self.fail:
            raise RuntimeError("model missing")


class TestBuildLanes:
    def test_builds_every_enabled_lane(self, tmp_path: Path) -> None:
        """Each enabled lane is built and no error is recorded."""
        lanes, errors = build_lanes(make_settings(tmp_path), LaneResources(home=tmp_path))
        assert sorted(lanes) == ["a", "b"]
        assert errors == {}

    def test_unknown_backend_is_recorded_not_raised(self, tmp_path: Path) -> None:
        """A lane whose backend cannot be built is reported with the reason; the others are built."""
        settings = make_settings(tmp_path)
        broken = LaneConfig(name="x", kind=LaneKind.KEYWORD, backend="no-such-backend")
        settings = replace(settings, lanes={**settings.lanes, "x": broken})
        lanes, errors = build_lanes(settings, LaneResources(home=tmp_path))
        assert "x" not in lanes
        assert errors["x"].startswith("lane could not be built")
        assert sorted(lanes) == ["a", "b"]


class TestWarmUps:
    async def test_embedder_is_warmed_once(self) -> None:
        """The embedder's ``warm()`` loads its model at open."""
        embedder = CountingEmbedder()
        await warm_embedder(embedder)
        assert embedder.warmed == 1

    async def test_embedder_failure_is_swallowed(self) -> None:
        """A model that cannot load does not stop the engine from opening."""
        embedder = CountingEmbedder(fail=True)
        await warm_embedder(embedder)
        assert embedder.warmed == 1
