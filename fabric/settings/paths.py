"""Where settings and data live: the built-in defaults shipped in the package, and the platform's folders.

- built-in defaults: ``fabric/config/*.toml``, package data read through :mod:`importlib.resources`, so an
  installed wheel has them as a checkout does;
- the user's settings file: ``<user config folder>/config.toml`` (``~/.config/retrieval-fabric/config.toml`` on
  Linux, ``~/Library/Application Support/retrieval-fabric/config.toml`` on macOS), read when it exists;
- the home (the embedded stores) and the cache (model exports, embeddings), in the user data and cache folders,
  never the working directory (``FABRIC_HOME`` and ``FABRIC_CACHE_DIR`` override them).

Folders follow ``platformdirs`` (``XDG_CONFIG_HOME``, ``XDG_DATA_HOME`` and ``XDG_CACHE_HOME`` on Linux).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import platformdirs

__all__ = ["APP_NAME", "default_cache_dir", "default_config_dir", "default_home", "user_config_file"]

APP_NAME = "retrieval-fabric"
"""The folder name under the platform's user folders."""


def default_config_dir() -> Path:
    """The built-in settings: the package's ``config/`` folder (``fabric/config/*.toml``)."""
    return Path(str(files("fabric").joinpath("config")))


def user_config_file() -> Path:
    """The user's own settings file in the platform's config folder (it may not exist)."""
    return platformdirs.user_config_path(APP_NAME) / "config.toml"


def default_home() -> Path:
    """The home when neither ``FABRIC_HOME``, ``--home`` nor a settings file names one."""
    return platformdirs.user_data_path(APP_NAME) / "home"


def default_cache_dir() -> Path:
    """The cache shared by every home and working directory when ``FABRIC_CACHE_DIR`` is not set."""
    return platformdirs.user_cache_path(APP_NAME)
