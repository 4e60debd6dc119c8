"""Tests for the ``[router]`` settings: project defaults, overrides and the checks naming ``router.<key>``."""

from __future__ import annotations

import dataclasses

import pytest

from fabric.core.errors import ConfigError
from fabric.query.validation import parse_request
from fabric.settings import load_settings
from fabric.settings.router import RouterConfig, StrategyLanes, validate_router_config


def env(**kw: str) -> dict[str, str]:
    return {f"FABRIC__router__{k}": v for k, v in kw.items()}


def test_project_file_holds_the_tuned_thresholds() -> None:
    """fabric/config/router.toml: skewness 0.5, max score 1.01 (tuned: rule 3 never fires), δ 0.05, top-10 probe, no
    probe-alone Dense; heuristic decides auto; Dense is keyword + vector (measured: docs/router.md)."""
    cfg = load_settings(env={}).router
    assert (cfg.skew_max, cfg.max_score_min, cfg.delta, cfg.probe_k) == (0.5, 1.01, 0.05, 10)
    assert (cfg.probe_alone, cfg.probe_alone_margin) == (False, 0.15)
    assert cfg.auto == "heuristic"
    assert cfg.strategies == StrategyLanes(
        dense=("keyword", "vector"), temporal=("keyword", "vector", "graph"), graph=("keyword", "vector", "graph")
    )
    assert (cfg.graph_weight, cfg.default_route) == (0.35, "auto")
    # the file states the defaults, nothing hidden, except the route: settings built in code (tests' fake engines)
    # keep the federation, the shipped file routes
    assert cfg == dataclasses.replace(RouterConfig(), default_route="auto")
    assert RouterConfig().default_route == "all"


def test_default_route_applies_to_requests_without_one() -> None:
    """``default_route`` is the route of a request that names none; a request's own route still wins."""
    settings = load_settings(env=env(default_route='"auto"'))
    assert parse_request({"query": "x"}, settings).route == "auto"
    assert parse_request({"query": "x", "route": "all"}, settings).route == "all"


def test_env_override() -> None:
    """Thresholds are tunable without code."""
    assert load_settings(env=env(skew_max="0.8")).router.skew_max == 0.8


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"auto": '"magic"'}, "router.auto"),
        ({"probe_k": "1"}, "router.probe_k"),
        ({"delta": "-0.1"}, "router.delta"),
        ({"probe_alone_margin": "-0.1"}, "router.probe_alone_margin"),
        ({"default_route": '"fastest"'}, "router.default_route"),
        ({"graph_weight": "-1"}, "router.graph_weight"),
        ({"temporal_pattern": '"(unclosed"'}, "router.temporal_pattern"),
        ({"probe_lane": '"nope"'}, "router.probe_lane"),
        ({"strategies__graph": '["vector", "ghost"]'}, "router.strategies"),
        ({"strategies__dense": "[]"}, "router.strategies.dense"),
        ({"colour": '"blue"'}, "router"),
    ],
)
def test_bad_values_name_the_key(overrides: dict[str, str], key: str) -> None:
    """Every bad setting is a ConfigError naming its dotted key."""
    with pytest.raises(ConfigError) as info:
        load_settings(env=env(**overrides))
    assert info.value.key.startswith(key)


def test_lane_names_are_checked_only_against_known_lanes() -> None:
    """Without lanes (tests, partial configs) names are not checked; planning then falls back to every lane."""
    assert validate_router_config(RouterConfig(), {}, "x") == RouterConfig()
    with pytest.raises(ConfigError, match="unknown lane 'vector'"):
        validate_router_config(RouterConfig(), {"keyword": object()}, "x")
