"""Tests for fabric.query.lane_setup: building, opening, closing and reporting lanes, the fail-open warm-ups."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from fabric.core.models import LaneKind
from fabric.query.lane_setup import (
    active_confidence,
    build_lanes,
    close_lanes,
    lane_health,
    needs_embedder,
    open_lanes,
    unavailable_lanes,
    warm_embedder,
)
from fabric.query.penalties import ProviderPenalties
from fabric.settings import EmbeddingsConfig, FusionConfig, LaneConfidence, LaneConfig
from lanes.base import LaneResources
from lanes.fake import FakeLane
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


class BrokenLane(FakeLane):
    """Fails to open and to close."""

    async def open(self) -> None:
        raise RuntimeError("cannot open")

    async def aclose(self) -> None:
        raise RuntimeError("cannot close")


class TestLaneLifecycle:
    def test_disabled_lanes_are_reported_unavailable(self, tmp_path: Path) -> None:
        """Build errors stay; a configured lane that was not built is named as disabled."""
        settings = make_settings(tmp_path)
        out = unavailable_lanes(settings, {"a": FakeLane(name="a")}, {"x": "lane could not be built: nope"})
        assert out == {
            "x": "lane could not be built: nope",
            "b": "lane disabled in configuration (lanes.b.enabled = false)",
        }

    def test_only_a_real_vector_lane_needs_the_embedder(self, tmp_path: Path) -> None:
        """Fake lanes never load the model; a real vector backend does."""
        settings = make_settings(tmp_path)
        assert not needs_embedder(settings)
        vec = LaneConfig(name="v", kind=LaneKind.VECTOR, backend="sqlite_vec")
        assert needs_embedder(replace(settings, lanes={**settings.lanes, "v": vec}))

    async def test_open_lanes_is_fail_open(self) -> None:
        """A lane that cannot open stays in ``unopened``; the others are opened."""
        lanes = {"a": FakeLane(name="a"), "x": BrokenLane(name="x")}
        unopened = {"a", "x"}
        await open_lanes(lanes, sorted(unopened), unopened, timeout_s=1.0)
        assert unopened == {"x"}

    async def test_close_lanes_closes_the_rest(self) -> None:
        """A lane that fails to close does not keep the others open."""
        a = FakeLane(name="a")
        await close_lanes({"x": BrokenLane(name="x"), "a": a})
        assert a.closed

    def test_lane_health_lists_built_and_broken_lanes(self) -> None:
        """Built lanes carry provider and health; a broken lane its error."""
        out = lane_health({"a": FakeLane(name="a", provider="pa")}, {"x": "boom"}, {"a"}, ProviderPenalties())
        assert out["a"]["built"]
        assert not out["a"]["opened"]
        assert out["a"]["provider"] == "pa"
        assert out["a"]["health"]["state"] == "closed"
        assert out["x"] == {
            "built": False, "opened": False, "warming": False, "provider": None, "error": "boom", "health": None
        }  # fmt: skip


class TestActiveConfidence:
    """Which ``[fusion.confidence]`` calibrations the executor applies."""

    CAL = LaneConfidence(model="all-MiniLM-L6-v2", reference=0.62, slope=2.0, min=0.25, max=1.5)

    def _settings(self, tmp_path: Path, cal: LaneConfidence, model: str = "all-MiniLM-L6-v2"):
        s = make_settings(tmp_path)
        return replace(s, fusion=FusionConfig(confidence={"vector": cal}), embeddings=EmbeddingsConfig(model=model))

    def test_calibration_of_the_engine_model_applies(self, tmp_path: Path) -> None:
        """Measured with the engine's embedding model: it applies to the vector kind."""
        assert active_confidence(self._settings(tmp_path, self.CAL)) == {LaneKind.VECTOR: self.CAL}

    def test_another_model_is_not_judged_by_it(self, tmp_path: Path) -> None:
        """Another embedder's cosines have another scale: the calibration is left out."""
        assert active_confidence(self._settings(tmp_path, self.CAL, model="text-embedding-3-small")) == {}

    def test_zero_slope_is_left_out(self, tmp_path: Path) -> None:
        """slope = 0 turns it off."""
        assert active_confidence(self._settings(tmp_path, replace(self.CAL, slope=0.0))) == {}

    def test_shipped_defaults_calibrate_the_vector_lane(self) -> None:
        """The shipped configuration weighs the vector lane by its top cosine; the seed profile does not."""
        from fabric.settings import load_settings

        assert LaneKind.VECTOR in active_confidence(load_settings(env={}))
        assert active_confidence(load_settings(env={"FABRIC_PROFILE": "seed"})) == {}
