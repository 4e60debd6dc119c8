"""Where settings and data live: built-in defaults as package data, the platform's user folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric.settings import load_settings, setting_layers
from fabric.settings.paths import default_cache_dir, default_config_dir, default_home, user_config_file


def test_built_in_defaults_are_package_data() -> None:
    """The defaults and profiles ship inside the package (read with importlib.resources), not beside a checkout."""
    folder = default_config_dir()
    assert folder == Path(__file__).resolve().parents[3] / "fabric" / "config"
    assert {"lanes.toml", "modes.toml", "compose.toml", "staged.toml"} <= {p.name for p in folder.glob("*.toml")}


def test_home_and_cache_follow_the_platform(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The home and the cache live in the user data and cache folders, never the working directory."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert default_home() == tmp_path / "data" / "retrieval-fabric" / "home"
    assert default_cache_dir() == tmp_path / "cache" / "retrieval-fabric"
    settings = load_settings(env={})
    assert (settings.home, settings.cache_dir) == (default_home(), default_cache_dir())
    overridden = load_settings(env={"FABRIC_HOME": "/srv/kb", "FABRIC_CACHE_DIR": "/srv/cache"})
    assert (overridden.home, overridden.cache_dir) == (Path("/srv/kb"), Path("/srv/cache"))


def test_the_users_settings_file_sits_between_the_profile_and_fabric_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Order: built-in < profile < the user's file < FABRIC_CONFIG < FABRIC__ variables."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    own = user_config_file()
    assert own == tmp_path / "xdg" / "retrieval-fabric" / "config.toml"
    own.parent.mkdir(parents=True)
    own.write_text("schema = 1\n[fusion]\nrrf_k = 41\n[engine]\nmax_top_k = 77\n")
    named = tmp_path / "named.toml"
    named.write_text("schema = 1\n[fusion]\nrrf_k = 42\n")
    assert load_settings(env={}).fusion.rrf_k == 41
    s = load_settings(env={"FABRIC_CONFIG": str(named)})
    assert (s.fusion.rrf_k, s.engine.max_top_k) == (42, 77)
    assert load_settings(env={"FABRIC_CONFIG": str(named), "FABRIC__fusion__rrf_k": "43"}).fusion.rrf_k == 43
    labels = [label for label, _ in setting_layers(profile="compose", env={"FABRIC_CONFIG": str(named)})]
    assert labels[-3:] == [str(default_config_dir() / "compose.toml"), str(own), str(named)]


def test_an_unknown_profile_names_the_built_in_ones() -> None:
    """A profile that does not exist is a clear error listing the shipped profiles."""
    from fabric.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"profile 'nope' not found \(built-in: .*compose.*staged"):
        load_settings(profile="nope", env={})
