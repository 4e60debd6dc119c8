"""The examples run as a user runs them, on the demo corpus (real stores, real MiniLM, a real MCP subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, *args: str, env: dict[str, str] | None = None) -> str:
    environment = {**os.environ, **(env or {})}
    environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environment.get('PATH', '')}"
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), *args],
        capture_output=True, text=True, env=environment, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == ""  # the library writes nothing its host did not ask for
    return done.stdout


def test_orchestrator_fans_out_searches_beside_an_ingest(tmp_path: Path) -> None:
    """Concurrent searches answer while an ingest runs; the fresh entries are found afterwards."""
    out = _run("orchestrator.py", str(tmp_path / "kb"))
    assert "ingested 22 notes" in out
    assert out.count(" found; first ") == 4
    assert "meanwhile ingested 2 fresh entries" in out
    assert "'who is on call': ops-1" in out


def test_agent_tool_over_mcp(tmp_path: Path) -> None:
    """The MCP tools list with their schemas, and a query answers structured items from the demo home."""
    home = tmp_path / "home"
    _run("orchestrator.py", str(home))  # the demo notes, ingested
    out = _run("agent_tool.py", str(home))
    assert "tool query(topic, limit, cursor, weights, fusion, mode, lanes, offset)" in out
    assert "['items', 'next_cursor', 'retrieval_ms', 'total']" in out
    assert "Found " in out
    assert "score_total=" in out
