"""Processes a test starts and kills: a parent script killed by SIGKILL, and the children it leaves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["assert_gone", "run_killed_parent"]

ROOT = Path(__file__).parents[2]


def run_killed_parent(script: Path) -> str:
    """Run ``script`` (which kills itself with SIGKILL) from the repository root; its standard output."""
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    return done.stdout


def assert_gone(pid: int, what: str, *, within_s: float = 10.0) -> None:
    """Wait until process ``pid`` has exited (or is a zombie nobody reaps); fail after ``within_s``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists() or _state(pid) == "Z":
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} {pid} outlived its parent")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1]
    except (OSError, IndexError):
        return "Z"
