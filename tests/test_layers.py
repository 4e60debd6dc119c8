"""Imports point one way: the CLI layer (``fabric.cli``, ``fabric.commands``) and the benchmarks sit on top.

Nothing in ``fabric`` below the CLI, nor ``lanes`` or ``fusion``, imports the CLI layer; nothing in the packages
imports ``bench`` or ``tests`` (neither ships in the wheel).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP = ("fabric.cli", "fabric.commands")


def imported(path: Path) -> set[str]:
    """Every module name ``path`` imports (absolute imports, at any depth of the file)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def modules(*packages: str) -> list[Path]:
    return sorted(p for pkg in packages for p in (ROOT / pkg).rglob("*.py"))


def is_cli(path: Path) -> bool:
    rel = path.relative_to(ROOT).as_posix()
    return rel == "fabric/cli.py" or rel.startswith("fabric/commands/")


@pytest.mark.parametrize("path", [p for p in modules("fabric", "lanes", "fusion") if not is_cli(p)], ids=str)
def test_no_module_below_the_cli_imports_it(path: Path) -> None:
    """Engine, ingest, eval, lanes and fusion modules never import ``fabric.cli`` or ``fabric.commands``."""
    assert not {n for n in imported(path) if any(n == t or n.startswith(t + ".") for t in TOP)}  # not fabric.client


@pytest.mark.parametrize("path", modules("fabric", "lanes", "fusion"), ids=str)
def test_packages_do_not_import_tooling(path: Path) -> None:
    """The installed packages never import ``bench`` or ``tests`` (``fabric bench`` loads ``bench`` by name)."""
    assert not {n for n in imported(path) if n.split(".")[0] in ("bench", "tests")}
