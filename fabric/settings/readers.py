"""Readers of settings data: TOML files, their merge, ``FABRIC__`` overrides, and typed dataclass building.

:func:`build` turns a TOML table into a frozen dataclass, coercing each value to the field's annotation
(numbers, strings, enums by name, tuples, tables, nested dataclasses) and rejecting unknown keys, so that every
bad setting becomes a :class:`~fabric.core.errors.ConfigError` naming the file and the dotted key. The sections'
meaning and validation rules live in :mod:`fabric.settings`.
"""

from __future__ import annotations

import dataclasses
import enum
import tomllib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fabric.core.errors import ConfigError

__all__ = ["SCHEMA", "build", "coerce", "env_overrides", "merge", "positive", "read_toml"]

SCHEMA = 1
"""The ``schema`` every settings file carries."""


def read_toml(path: Path) -> dict[str, Any]:
    """A settings file's tables, its ``schema`` checked and removed."""
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError("file not found", source=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", source=str(path)) from None
    schema = data.pop("schema", SCHEMA)
    if schema != SCHEMA:
        raise ConfigError(f"unsupported schema {schema!r} (expected {SCHEMA})", source=str(path), key="schema")
    return data


def merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` merged into ``base`` table by table (later values win)."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def coerce(tp: Any, value: Any, src: str, key: str) -> Any:
    """Coerce a TOML value to the annotated type ``tp`` or raise ConfigError."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return coerce(inner[0], value, src, key)
    if tp is Any:
        return value
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp.from_str(str(value)) if hasattr(tp, "from_str") else tp(value)
        except ValueError as exc:
            raise ConfigError(str(exc), source=src, key=key) from None
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"expected true/false, got {value!r}", source=src, key=key)
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"expected an integer, got {value!r}", source=src, key=key)
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"expected a number, got {value!r}", source=src, key=key)
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"expected a string, got {value!r}", source=src, key=key)
        return value
    if tp is Path:
        return Path(str(value))
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"expected a list, got {value!r}", source=src, key=key)
        return tuple(coerce(args[0], v, src, f"{key}[{i}]") for i, v in enumerate(value))
    if origin in (Mapping, dict) or tp in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(f"expected a table, got {value!r}", source=src, key=key)
        vt = args[1] if len(args) == 2 else Any
        return {str(k): coerce(vt, v, src, f"{key}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return build(tp, value, src, key)
    return value


def build(cls: type[Any], data: Any, src: str, key: str, **fixed: Any) -> Any:
    """Build dataclass ``cls`` from a TOML table, rejecting unknown keys."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"expected a table, got {data!r}", source=src, key=key)
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(unknown)}; valid: {', '.join(sorted(names - set(fixed)))}",
            source=src,
            key=key,
        )
    kwargs = dict(fixed)
    for name, value in data.items():
        kwargs[name] = coerce(hints[name], value, src, f"{key}.{name}" if key else name)
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ConfigError(str(exc), source=src, key=key) from None


def env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    """``FABRIC__a__b=value`` → ``{"a": {"b": value}}`` with TOML literal parsing (strings fall back)."""
    out: dict[str, Any] = {}
    for name, raw in env.items():
        if not name.startswith("FABRIC__"):
            continue
        path = [p for p in name[len("FABRIC__") :].split("__") if p]
        if not path:
            continue
        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return out


def positive(value: float, src: str, key: str) -> None:
    """Raise ConfigError unless ``value > 0``."""
    if value <= 0:
        raise ConfigError(f"must be > 0, got {value!r}", source=src, key=key)
