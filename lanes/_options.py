"""Typed reading of a lane's ``options`` table, with :class:`~fabric.core.errors.ConfigError` naming the key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fabric.core.errors import ConfigError
from lanes.base import LaneSpec

__all__ = ["LaneOptions"]


class LaneOptions:
    """Read-only view of ``spec.options`` whose getters validate types and name ``lanes.<lane>.options.<key>``."""

    def __init__(self, spec: LaneSpec) -> None:
        self._opts: Mapping[str, Any] = spec.options
        self._prefix = f"lanes.{spec.name}.options"

    def _key(self, key: str) -> str:
        return f"{self._prefix}.{key}"

    def text(self, key: str, default: str | None = None) -> str:
        """A string option; ``default=None`` makes it required."""
        value = self._opts.get(key, default)
        if value is None:
            raise ConfigError("required option missing", key=self._key(key))
        if not isinstance(value, str):
            raise ConfigError(f"expected a string, got {value!r}", key=self._key(key))
        return value

    def number(self, key: str, default: float, *, minimum: float = 0.0) -> float:
        """A number option, strictly above ``minimum``."""
        value = self._opts.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= minimum:
            raise ConfigError(f"expected a number > {minimum:g}, got {value!r}", key=self._key(key))
        return float(value)

    def integer(self, key: str, default: int, *, minimum: int = 1) -> int:
        """An integer option, at least ``minimum``."""
        value = self._opts.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ConfigError(f"expected an integer >= {minimum}, got {value!r}", key=self._key(key))
        return value

    def flag(self, key: str, default: bool) -> bool:
        """A boolean option."""
        value = self._opts.get(key, default)
        if not isinstance(value, bool):
            raise ConfigError(f"expected true/false, got {value!r}", key=self._key(key))
        return value

    def texts(self, key: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        """A list of strings."""
        value = self._opts.get(key, default)
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"expected a list of strings, got {value!r}", key=self._key(key))
        return tuple(value)

    def raw(self, key: str, default: Any = None) -> Any:
        """The option as written (for tables the caller validates itself)."""
        return self._opts.get(key, default)
