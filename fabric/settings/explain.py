"""The effective settings, key by key, with the layer each came from (``fabric config show``).

A key set by a settings file, a profile or the environment names that source; any other key shows its built-in
default (a dataclass field of :mod:`fabric.settings.sections`). Secret values (API keys, passwords, tokens) are
never printed: only whether they are set.
"""

from __future__ import annotations

import dataclasses
import enum
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fabric.settings import ENV_URLS, Settings, load_settings, setting_layers

__all__ = ["SECRET_MARKS", "SettingRow", "explain_settings"]

SECRET_MARKS = ("api_key", "password", "secret", "token")
"""A key whose last part contains one of these holds a secret."""

_DEFAULT = "built-in default"
_SECTIONS = ("engine", "fusion", "preflight", "penalties", "embeddings", "ingest", "router", "slowcook")


@dataclasses.dataclass(frozen=True, slots=True)
class SettingRow:
    """One effective setting: its dotted key, its value (``"<set>"`` for a secret) and where it came from."""

    key: str
    value: Any
    source: str

    def to_dict(self) -> dict[str, Any]:
        """JSON of the row."""
        return {"key": self.key, "value": self.value, "source": self.source}


def explain_settings(
    config_dir: Path | None = None,
    *,
    user_file: Path | None = None,
    profile: str | None = None,
    env: Mapping[str, str] | None = None,
) -> list[SettingRow]:
    """Every effective setting with its source, in key order (the same sources :func:`load_settings` reads).

    Raises:
        ConfigError: as :func:`load_settings`.
    """
    env = os.environ if env is None else env
    settings = load_settings(config_dir, user_file=user_file, profile=profile, env=env)
    origin: dict[str, str] = {}
    for label, data in setting_layers(config_dir, user_file=user_file, profile=profile, env=env):
        for key in _leaves(data):
            origin[key] = label
    origin.update(_from_environment(settings, env))
    rows = []
    for key, value in sorted(_leaves(_effective(settings)).items()):
        source = origin.get(key) or _parent_origin(key, origin)
        rows.append(SettingRow(key, "<set>" if _secret(key) and value else value, source))
    return rows


def _effective(s: Settings) -> dict[str, Any]:
    """The settings in the shape of the TOML files."""
    out: dict[str, Any] = {
        "home": str(s.home),
        "cache_dir": str(s.cache_dir),
        "default": s.authority_default,
        "domains": {d: _plain(e) for d, e in s.authority.items()},
        "modes": {m.value: _plain(c) for m, c in s.modes.items()},
        "lanes": {n: {k: v for k, v in _plain(c).items() if k != "name"} for n, c in s.lanes.items()},
    }
    out.update({name: _plain(getattr(s, name)) for name in _SECTIONS})
    return out


def _from_environment(s: Settings, env: Mapping[str, str]) -> dict[str, str]:
    """Keys the environment sets outside the ``FABRIC__`` overrides: the home, the cache, service URLs, secrets."""
    found = {
        key: f"env {var}" for key, var in (("home", "FABRIC_HOME"), ("cache_dir", "FABRIC_CACHE_DIR")) if env.get(var)
    }
    for var, (backend, option) in ENV_URLS.items():
        if env.get(var):
            found.update(
                {f"lanes.{n}.options.{option}": f"env {var}" for n, c in s.lanes.items() if c.backend == backend}
            )
    return found


def _parent_origin(key: str, origin: Mapping[str, str]) -> str:
    """The source of the closest enclosing table a layer set as a whole (a lane's ``options = {...}``)."""
    parts = key.split(".")
    for n in range(len(parts) - 1, 0, -1):
        if ".".join(parts[:n]) in origin:
            return origin[".".join(parts[:n])]
    if key in ("home", "cache_dir"):
        return "platform default"
    return _DEFAULT


def _leaves(data: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted key → value of every leaf of nested tables (an empty table is a leaf)."""
    if isinstance(data, Mapping) and data:
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_leaves(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: _plain(data)}


def _plain(value: Any) -> Any:
    """A JSON- and TOML-friendly copy: dataclasses and mappings as dicts, enums as values, paths as text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k.value if isinstance(k, enum.Enum) else k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    return value


def _secret(key: str) -> bool:
    last = key.rsplit(".", 1)[-1].lower()
    return any(mark in last for mark in SECRET_MARKS)
