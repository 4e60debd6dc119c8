"""docs/seeds.md, the seed-to-feature table, is kept true: every row's command runs and every module it names exists.

The commands run as a reader would run them, from the checkout, over a home that holds the demo notes
(``fabric demo``), here with embeddings off and a fresh home, cache and temporary folder of the test's own.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "seeds.md"
HEADER = ["seed", "requirement", "where", "default / profile", "measured", "command"]
_CODE = re.compile(r"`([^`]+)`")


def table() -> list[dict[str, str]]:
    """The rows of the page's table, as ``{column: cell}``."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| seed |"))
    assert [c.strip() for c in lines[start].strip().strip("|").split("|")] == HEADER
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == len(HEADER), line
        rows.append(dict(zip(HEADER, cells, strict=True)))
    return rows


ROWS = table()


def _command(row: dict[str, str]) -> str:
    found: list[str] = _CODE.findall(row["command"])
    assert len(found) == 1, row["command"]
    assert found[0].startswith("fabric "), row["command"]
    return found[0]


def test_every_seed_has_rows() -> None:
    seeds = {s.strip() for row in ROWS for s in row["seed"].split(",")}
    assert {"000", "001", "002", "003", "004"} <= seeds


@pytest.mark.parametrize("row", ROWS, ids=[r["requirement"][:40] for r in ROWS])
def test_named_modules_exist(row: dict[str, str]) -> None:
    paths = [p for p in _CODE.findall(row["where"]) if "/" in p]
    if not paths:
        assert "not done" in row["default / profile"], row
    for path in paths:
        assert (ROOT / path).exists(), f"{path} named in docs/seeds.md does not exist"
    if "`seed` profile" in row["default / profile"]:
        assert (ROOT / "fabric" / "config" / "seed.toml").exists()


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A demo home, embeddings off; caches and temporary files under the test's folder."""
    root = tmp_path_factory.mktemp("seeds")
    tmp = root / "tmp"
    tmp.mkdir()
    out = {
        **os.environ,
        "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "FABRIC_HOME": str(root / "home"),
        "FABRIC_CACHE_DIR": str(root / "cache"),
        "FABRIC__embeddings__backend": "none",
        "TMPDIR": str(tmp),
    }
    _run("fabric demo", out)
    return out


def _run(command: str, env: dict[str, str]) -> None:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


@pytest.mark.parametrize("row", ROWS, ids=[r["requirement"][:40] for r in ROWS])
def test_command_runs(row: dict[str, str], env: dict[str, str]) -> None:
    _run(_command(row), env)
