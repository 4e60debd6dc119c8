"""Tests for fabric.settings: loading, overlays, env overrides and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric.core.errors import ConfigError
from fabric.core.models import FusionMode, LaneKind, Mode
from fabric.settings import default_config_dir, load_settings


def _copy_config(tmp_path: Path) -> Path:
    dst = tmp_path / "config"
    dst.mkdir()
    for f in default_config_dir().glob("*.toml"):
        (dst / f.name).write_text(f.read_text())
    return dst


class TestLoadSettings:
    def test_project_config_has_seed_budgets(self) -> None:
        """The shipped modes carry the seed's per-lane budgets."""
        s = load_settings(env={})
        assert s.mode(Mode.SIMPLE).lanes["keyword"] == 500
        assert s.mode(Mode.TECHNICAL).lanes["vector"] == 1500
        assert s.mode(Mode.RESEARCH).lanes["news"] == 800
        assert s.mode(Mode.SIMPLE).total_budget_ms == 5000

    def test_lanes_are_typed(self) -> None:
        """Lanes load with their kind enum and fallbacks."""
        s = load_settings(env={})
        assert s.lanes["vector"].kind is LaneKind.VECTOR
        assert s.lanes["vector"].fallback == "keyword"
        assert s.fusion.mode is FusionMode.SCORE_ZSCORE
        assert s.fusion.rrf_k == 60

    def test_generic_env_override_parses_toml_literals(self) -> None:
        """FABRIC__section__key overrides a setting with a typed value."""
        s = load_settings(env={"FABRIC__fusion__rrf_k": "40", "FABRIC__lanes__vector__weight": "0.5"})
        assert s.fusion.rrf_k == 40
        assert s.lanes["vector"].weight == 0.5

    def test_service_url_env_applies_to_backend(self) -> None:
        """FABRIC_QDRANT_URL lands in the options of lanes using the qdrant backend."""
        env = {"FABRIC_QDRANT_URL": "http://127.0.0.1:6333", "FABRIC__lanes__vector__backend": "qdrant"}
        s = load_settings(env=env)
        assert s.lanes["vector"].options["url"] == "http://127.0.0.1:6333"

    def test_home_from_env(self) -> None:
        """FABRIC_HOME sets the store folder."""
        assert load_settings(env={"FABRIC_HOME": "/tmp/x"}).home == Path("/tmp/x")

    def test_user_file_overrides(self, tmp_path: Path) -> None:
        """A user file overrides project values."""
        user = tmp_path / "me.toml"
        user.write_text("schema = 1\n[fusion]\nmode = 'rrf'\n")
        assert load_settings(user_file=user, env={}).fusion.mode is FusionMode.RRF


class TestConfigErrors:
    def test_bad_type_names_key(self) -> None:
        """A wrongly typed value fails naming its dotted key."""
        with pytest.raises(ConfigError, match=r"lanes\.vector\.weight"):
            load_settings(env={"FABRIC__lanes__vector__weight": "'heavy'"})

    @pytest.mark.parametrize(
        ("key", "value"),
        [("slope", "-1"), ("min", "0"), ("min", "1.5"), ("max", "0.5"), ("reference", "nan"), ("max", "inf")],
    )
    def test_bad_confidence_names_key(self, key: str, value: str) -> None:
        """A confidence calibration out of range fails naming its key."""
        with pytest.raises(ConfigError, match=rf"fusion\.confidence\.vector\.{key}"):
            load_settings(env={f"FABRIC__fusion__confidence__vector__{key}": value})

    def test_confidence_of_unknown_kind(self) -> None:
        """A calibration for a lane kind that does not exist fails naming it."""
        with pytest.raises(ConfigError, match=r"fusion\.confidence\.vectr"):
            load_settings(env={"FABRIC__fusion__confidence__vectr__slope": "1"})

    def test_negative_fallback_reserve_names_key(self) -> None:
        """A negative fallback reserve fails naming its key."""
        with pytest.raises(ConfigError, match=r"lanes\.web\.fallback_reserve_ms"):
            load_settings(env={"FABRIC__lanes__web__fallback_reserve_ms": "-5"})

    def test_unknown_key_lists_valid(self) -> None:
        """An unknown key fails and lists the valid ones."""
        with pytest.raises(ConfigError, match="unknown key"):
            load_settings(env={"FABRIC__fusion__rrf_kk": "1"})

    def test_bad_schema(self, tmp_path: Path) -> None:
        """A file with another schema version is refused."""
        cdir = _copy_config(tmp_path)
        (cdir / "fusion.toml").write_text("schema = 2\n")
        with pytest.raises(ConfigError, match="schema"):
            load_settings(cdir, env={})

    def test_unknown_fallback(self) -> None:
        """A fallback naming no lane fails at load."""
        with pytest.raises(ConfigError, match=r"lanes\.vector\.fallback"):
            load_settings(env={"FABRIC__lanes__vector__fallback": "'nowhere'"})

    def test_invalid_toml(self, tmp_path: Path) -> None:
        """Broken TOML names the file."""
        cdir = _copy_config(tmp_path)
        (cdir / "lanes.toml").write_text("[lanes\n")
        with pytest.raises(ConfigError, match=r"lanes\.toml"):
            load_settings(cdir, env={})

    def test_negative_budget(self) -> None:
        """A non-positive budget is refused."""
        with pytest.raises(ConfigError, match=r"modes\.simple\.lanes\.web"):
            load_settings(env={"FABRIC__modes__simple__lanes__web": "-1"})

    def test_unknown_mode(self) -> None:
        """An unknown mode table is refused with the valid values."""
        with pytest.raises(ConfigError, match="valid"):
            load_settings(env={"FABRIC__modes__turbo__total_budget_ms": "1"})


class TestIngestSettings:
    def test_defaults_are_typed(self) -> None:
        """The shipped [ingest] table loads: 32 MiB bodies, paths disabled."""
        s = load_settings(env={})
        assert (s.ingest.max_body_bytes, s.ingest.allowed_root, s.ingest.sync_max_entries) == (
            32 * 1024 * 1024,
            "",
            100,
        )

    @pytest.mark.parametrize(
        ("key", "value"),
        [("max_body_bytes", "0"), ("history", "-1"), ("sync_max_entries", "-1"), ("max_queued", "'x'")],
    )
    def test_bad_value_names_key(self, key: str, value: str) -> None:
        """A bad [ingest] value fails at load naming ingest.<key>."""
        with pytest.raises(ConfigError, match=rf"ingest\.{key}"):
            load_settings(env={f"FABRIC__ingest__{key}": value})


class TestSlowCookSettings:
    def test_shipped_table(self) -> None:
        """fabric/config/slowcook.toml loads: the project's query set, five failure cases, the documented tolerances."""
        s = load_settings(env={})
        assert (s.slowcook.queries, s.slowcook.split, s.slowcook.receipt, s.slowcook.top_failures) == (
            "", "test", "", 5,
        )  # fmt: skip
        assert s.slowcook.tolerance == {"ndcg_at_10": 0.02, "mrr_at_10": 0.02, "hit_at_1": 0.05, "hit_at_5": 0.0}

    @pytest.mark.parametrize(
        ("key", "value", "message"),
        [
            ("top_failures", "0", "slowcook.top_failures"),
            ("tolerance__ndcg_at_10", "-0.1", r"slowcook\.tolerance\.ndcg_at_10"),
            ("tolerance__ndcg", "0.1", "unknown metric; valid: ndcg_at_10"),
        ],
    )
    def test_bad_value_names_key(self, key: str, value: str, message: str) -> None:
        """A zero failure count, a negative tolerance or an unknown metric fails at load naming its key."""
        with pytest.raises(ConfigError, match=message):
            load_settings(env={f"FABRIC__slowcook__{key}": value})
