"""Test helpers: settings with fake lanes and short budgets."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from fabric.core.logs import configure_logging
from fabric.core.models import LaneKind, Mode
from fabric.settings import (
    FusionConfig,
    LaneConfig,
    ModeConfig,
    PenaltyConfig,
    PreflightConfig,
    Settings,
    StageConfig,
)


def lane_config(name: str, **kw: Any) -> LaneConfig:
    """A fake-backed lane config."""
    kw.setdefault("kind", LaneKind.KEYWORD)
    return LaneConfig(name=name, backend="fake", **kw)


def make_settings(
    home: Path,
    lanes: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    total_ms: float = 2000.0,
    lane_ms: float = 1000.0,
    budgets: Mapping[str, float] | None = None,
    preflight: PreflightConfig | None = None,
    penalties: PenaltyConfig | None = None,
    stages: StageConfig | None = None,
) -> Settings:
    """Settings whose every lane is fake; each lane gets ``lane_ms`` unless ``budgets`` says otherwise."""
    lanes = lanes if lanes is not None else {"a": {}, "b": {}}
    configs = {name: lane_config(name, **dict(kw)) for name, kw in lanes.items()}
    lane_budgets = dict.fromkeys(configs, lane_ms)
    lane_budgets.update(budgets or {})
    modes = {m: ModeConfig(total_budget_ms=total_ms, lanes=lane_budgets) for m in Mode}
    return Settings(
        home=home,
        modes=modes,
        lanes=configs,
        preflight=preflight or PreflightConfig(),
        penalties=penalties or PenaltyConfig(),
        fusion=FusionConfig(stages=stages or StageConfig()),
    )


@pytest.fixture(autouse=True)
def quiet_logs() -> None:
    """JSON logs at CRITICAL only: the default dev renderer draws slow rich tracebacks inside lane budgets."""
    configure_logging(level="CRITICAL")
