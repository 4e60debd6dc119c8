"""The floors of the package, beyond what ``lint-imports`` checks (``[tool.importlinter]`` in pyproject.toml:
the layers from the CLI down to the core, fusion's purity, no tooling in the wheel, no import cycles).

Here: the contracts themselves hold (the same check ``make lint`` runs), the packages never import ``tests``
(not a root package of the contracts), each floor says what it may import, and ``fabric/`` stays a few modules
beside its floors.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FLOORS = ("core", "settings", "net", "embed", "query", "ingest", "eval", "serve", "integrations", "cli")


def imported(path: Path) -> set[str]:
    """Every module name ``path`` imports (absolute imports, at any depth of the file)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def modules(*packages: str) -> list[Path]:
    return sorted(p for pkg in packages for p in (ROOT / pkg).rglob("*.py"))


def test_import_contracts_hold() -> None:
    """``lint-imports`` keeps every contract of pyproject.toml."""
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.skip("lint-imports is not installed (the dev extra)")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-3000:]


@pytest.mark.parametrize("path", modules("fabric", "lanes", "fusion"), ids=str)
def test_packages_do_not_import_tests(path: Path) -> None:
    """The installed packages never import ``tests`` (not shipped in the wheel)."""
    assert not {n for n in imported(path) if n.split(".")[0] == "tests"}


@pytest.mark.parametrize("floor", FLOORS)
def test_each_floor_says_what_it_is(floor: str) -> None:
    """Every floor is a package whose docstring says what it holds."""
    init = ROOT / "fabric" / floor / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
    assert doc, init
    assert len(doc) > 60, init


def test_fabric_is_floors_not_a_flat_folder() -> None:
    """At most 12 modules stand directly in ``fabric/``; the rest live on a floor."""
    assert len(list((ROOT / "fabric").glob("*.py"))) <= 12


@pytest.mark.parametrize("path", modules("fabric", "lanes", "fusion"), ids=str)
def test_modules_and_functions_stay_small(path: Path) -> None:
    """No product module over 400 lines, no function over 60: a larger one is split by what it does."""
    source = path.read_text(encoding="utf-8")
    assert len(source.splitlines()) <= 400
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            assert node.end_lineno - node.lineno + 1 <= 60, f"{node.name} is {node.end_lineno - node.lineno + 1} lines"
