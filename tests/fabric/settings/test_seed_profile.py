"""The ``seed`` profile (the user's policies as written) and the settings it needs: loaded, effective, checked."""

from __future__ import annotations

import pytest

from fabric.cli import main
from fabric.core.errors import ConfigError
from fabric.core.models import FusionMode, LaneKind, Mode
from fabric.settings import (
    AdditiveBoosts,
    DedupWeights,
    FactorWeights,
    ModeConfig,
    Settings,
    StageConfig,
    load_settings,
)
from fabric.settings.explain import explain_settings

ENV = {"FABRIC_HOME": "/nonexistent"}


def test_seed_profile_is_the_literal_policies() -> None:
    """Every setting of the profile holds the seeds' value (seed 003 fusion and constraints, seed 000 stages,
    seed 004 router)."""
    s = load_settings(profile="seed", env=ENV)
    f = s.fusion
    assert (f.mode, f.rrf_k, f.factor_scaling) == (FusionMode.RRF, 60, "literal")
    assert f.boosts == AdditiveBoosts(domain=0.1, recency=0.05, recency_steps=((1.0, 1.0), (7.0, 0.5), (30.0, 0.2)))
    assert f.factors == FactorWeights(rrf=0.5, domain_diversity=0.2, recency=0.15, authority=0.1, quality=0.05)
    assert (f.dedup.title_jaccard, f.dedup.url_similarity) == (0.8, 0.9)
    assert f.dedup.weights == DedupWeights(title=0.7, content=0.2, url=0.1, near=0.0)
    assert f.stages == StageConfig(ranking="fused")  # the defaults are seed 000's numbers; ranking is the switch
    assert (s.engine.unknown_mode, s.engine.all_time_years, s.engine.source_binding) == (Mode.SIMPLE, 10, "sites")
    lance = s.lanes["vector_lance"]
    assert (lance.kind, lance.backend, lance.enabled, lance.stage, lance.weight) == (
        LaneKind.VECTOR, "lancedb", True, 2, 1.0
    )  # fmt: skip
    assert all(lc.weight == 1.0 for lc in s.enabled_lanes())
    assert (s.router.skew_max, s.router.max_score_min, s.router.graph_weight) == (0.5, 0.65, 1.0)
    assert s.router.strategies.dense == ("vector",)


def test_defaults_are_unchanged() -> None:
    """Without the profile: normalised ranking, no additive boosts, every dedup criterion, no lancedb lane."""
    s = load_settings(env=ENV)
    assert (s.fusion.factor_scaling, s.fusion.boosts, s.fusion.dedup.weights) == (
        "normalised", AdditiveBoosts(domain=0.0, recency=0.0), DedupWeights()
    )  # fmt: skip
    assert (s.fusion.stages.ranking, s.engine.unknown_mode, s.engine.all_time_years) == ("factors", None, 0)
    assert s.engine.source_binding == "filter"
    assert "vector_lance" not in s.lanes


def test_config_show_names_the_profile(capsys: pytest.CaptureFixture[str]) -> None:
    """``fabric --profile seed config show`` prints the literal values, each from seed.toml."""
    assert main(["--profile", "seed", "config", "show"]) == 0
    out = capsys.readouterr().out
    for line in ('fusion.factor_scaling = "literal"', "fusion.boosts.domain = 0.1", 'engine.unknown_mode = "simple"',
                 'lanes.vector_lance.backend = "lancedb"', 'router.strategies.dense = ["vector"]'):  # fmt: skip
        assert f"{line}  # " in out
        assert out.split(f"{line}  # ")[1].split("\n")[0].endswith("seed.toml")
    rows = {r.key: r.source for r in explain_settings(profile="seed", env=ENV)}
    assert rows["fusion.stages.ranking"].endswith("seed.toml")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("fusion__factor_scaling", '"raw"', "unknown value 'raw'"),
        ("fusion__stages__ranking", '"best"', "unknown value 'best'"),
        ("fusion__boosts__domain", "-0.1", "must be >= 0"),
        ("fusion__boosts__recency_steps", "[[7.0, 0.5], [1.0, 1.0]]", "days must increase"),
        ("fusion__boosts__recency_steps", "[[1.0]]", "expected [days, step]"),
        ("fusion__dedup__weights__near", "-1", "must be >= 0"),
        ("fusion__stages__p95_target_ms", "0", "must be > 0"),
        ("engine__source_binding", '"all"', "unknown value 'all'"),
        ("engine__all_time_years", "-10", "must be >= 0"),
        ("engine__unknown_mode", '"fast"', "fast"),
    ],
)
def test_bad_values_name_their_key(key: str, value: str, message: str) -> None:
    """A bad value of a new setting is a ConfigError naming the dotted key."""
    with pytest.raises(ConfigError) as err:
        load_settings(env={**ENV, f"FABRIC__{key}": value})
    assert message in str(err.value)
    assert key.replace("__", ".") in str(err.value)


def test_a_mode_without_budgets_falls_back() -> None:
    """``engine.unknown_mode``: a mode with no budgets gets that mode's (seed 003: simple's), else the defaults."""
    simple = ModeConfig(total_budget_ms=5000.0, lanes={"vector": 1000.0})
    s = load_settings(profile="seed", env=ENV)
    fallback = Settings(modes={Mode.SIMPLE: simple}, engine=s.engine)
    assert fallback.mode(Mode.RESEARCH) is simple
    assert Settings(modes={Mode.SIMPLE: simple}).mode(Mode.RESEARCH) == ModeConfig()
