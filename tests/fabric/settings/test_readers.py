"""Tests for fabric.settings.readers: TOML reading, merging, ``FABRIC__`` overrides and typed dataclass building."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fabric.core.errors import ConfigError
from fabric.core.models import Mode
from fabric.settings.readers import build, coerce, env_overrides, merge, positive, read_toml


@dataclass(frozen=True)
class Inner:
    n: int = 1


@dataclass(frozen=True)
class Outer:
    name: str = "x"
    ratio: float = 0.5
    mode: Mode = Mode.TECHNICAL
    tags: tuple[str, ...] = ()
    inner: Inner = field(default_factory=Inner)
    limit: int | None = None


class TestReadToml:
    def test_schema_is_checked_and_removed(self, tmp_path: Path) -> None:
        """A file with ``schema = 1`` reads as its tables alone."""
        path = tmp_path / "a.toml"
        path.write_text("schema = 1\n[fusion]\nrrf_k = 40\n")
        assert read_toml(path) == {"fusion": {"rrf_k": 40}}

    def test_other_schema_names_the_file_and_key(self, tmp_path: Path) -> None:
        """An unsupported schema is a ConfigError naming the file and ``schema``."""
        path = tmp_path / "a.toml"
        path.write_text("schema = 2\n")
        with pytest.raises(ConfigError, match=r"a\.toml.*schema"):
            read_toml(path)

    def test_invalid_toml_is_a_config_error(self, tmp_path: Path) -> None:
        """Broken TOML is reported as invalid, never a traceback."""
        path = tmp_path / "a.toml"
        path.write_text("[fusion\n")
        with pytest.raises(ConfigError, match="invalid TOML"):
            read_toml(path)


class TestMerge:
    def test_tables_merge_and_later_values_win(self) -> None:
        """Nested tables merge key by key; a later scalar replaces the earlier one."""
        assert merge({"a": {"x": 1, "y": 2}, "b": 1}, {"a": {"y": 3}, "b": 2}) == {"a": {"x": 1, "y": 3}, "b": 2}


class TestEnvOverrides:
    def test_double_underscores_make_a_key_path_with_toml_values(self) -> None:
        """``FABRIC__fusion__rrf_k=40`` becomes ``{"fusion": {"rrf_k": 40}}`` (an integer)."""
        assert env_overrides({"FABRIC__fusion__rrf_k": "40", "OTHER": "1"}) == {"fusion": {"rrf_k": 40}}

    def test_a_non_toml_value_stays_a_string(self) -> None:
        """A bare word is not TOML; it is kept as the string given."""
        assert env_overrides({"FABRIC__embeddings__backend": "none"}) == {"embeddings": {"backend": "none"}}


class TestBuild:
    def test_values_are_coerced_to_the_annotations(self) -> None:
        """Ints become floats, mode names become members, lists tuples, tables nested dataclasses."""
        got = build(Outer, {"ratio": 1, "mode": "research", "tags": ["a"], "inner": {"n": 3}}, "f.toml", "outer")
        assert got == Outer(ratio=1.0, mode=Mode.RESEARCH, tags=("a",), inner=Inner(n=3))

    def test_unknown_key_lists_the_valid_ones(self) -> None:
        """A misspelt key is rejected with the valid keys named."""
        with pytest.raises(ConfigError, match=r"unknown key\(s\) nmae; valid: .*name"):
            build(Outer, {"nmae": "y"}, "f.toml", "outer")

    def test_bad_type_names_the_dotted_key(self) -> None:
        """A wrong type names the full key path."""
        with pytest.raises(ConfigError, match=r"outer\.inner\.n"):
            build(Outer, {"inner": {"n": "three"}}, "f.toml", "outer")


class TestCoerce:
    def test_bool_is_not_an_integer(self) -> None:
        """``true`` where an integer is expected is an error, not 1."""
        with pytest.raises(ConfigError, match="expected an integer"):
            coerce(int, True, "f.toml", "k")

    def test_optional_accepts_none(self) -> None:
        """``int | None`` keeps None."""
        assert coerce(int | None, None, "f.toml", "k") is None


class TestPositive:
    def test_zero_is_rejected(self) -> None:
        """Budgets and limits must be above zero."""
        with pytest.raises(ConfigError, match="must be > 0"):
            positive(0, "f.toml", "modes.fast.total_budget_ms")
