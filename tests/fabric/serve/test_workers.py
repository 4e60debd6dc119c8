"""``fabric serve --workers N``: a real supervisor and its worker processes on one socket, over loopback HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

import fabric.serve.workers as mod
from fabric.serve.workers import child_argv

ROOT = Path(__file__).resolve().parents[3]


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env |= {"FABRIC__lanes__vector__enabled": "false", "FABRIC__ingest__replica_poll_s": "0.1"}
    for name in ("FABRIC_HOME", "FABRIC_STATE_URL", "FABRIC_CRASH_AT", "FABRIC_CURSOR_SECRET"):
        env.pop(name, None)
    return env


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        out += [int(c) for c in task.read_text().split()]
    return sorted(out)


def _start(home: Path, port: int, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "fabric.cli", "--home", str(home), "serve", "--port", str(port), *extra],
        cwd=str(ROOT), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip


@pytest.fixture
def supervisor(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``fabric serve --workers 2`` on a fresh home, once both workers are ready."""
    port = _port()
    proc = _start(tmp_path / "home", port, "--workers", "2")
    try:
        assert proc.stdout is not None
        lines = {proc.stdout.readline().strip() for _ in range(2)}
        assert any("serving on" in line and "(2 workers)" in line for line in lines), lines
        assert "fabric: worker 1 ready" in lines, lines
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        left = _children(proc.pid) if proc.poll() is None else []
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for child in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        if proc.stdout is not None:
            proc.stdout.close()


def test_child_argv_adds_the_socket_and_the_index() -> None:
    argv = child_argv(["--home", "h", "serve", "--workers", "2"], 5, 1)
    assert argv[:3] == [sys.executable, "-m", "fabric.cli"]
    assert argv[3:] == ["--home", "h", "serve", "--workers", "2", "--listen-fd", "5", "--worker-index", "1"]


async def _search(url: str, n: int) -> list[int]:
    statuses = []
    for i in range(n):  # a new connection each: the kernel deals them out to the workers
        query = {"query": f"canary release {i}", "top_k": 3}
        async with aiohttp.ClientSession() as http, http.post(f"{url}/v1/search", json=query) as r:
            statuses.append(r.status)
    return statuses


async def test_two_workers_answer_share_tasks_report_metrics_and_restart(
    supervisor: tuple[subprocess.Popen[str], str],
) -> None:
    """Both workers serve; a task submitted through one is answered by any; /metrics holds both workers'
    samples; a worker killed with SIGKILL is replaced; SIGTERM stops the service cleanly (exit 0)."""
    proc, url = supervisor
    workers = _children(proc.pid)
    assert len(workers) == 2
    entries = [{"id": f"e-{i}", "text": f"Canary releases shift traffic step {i}."} for i in range(5)]
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{url}/v1/ingest", json={"entries": entries}) as r:
            assert r.status in (200, 202), await r.text()
            body = await r.json()
        task_id = body.get("task_id")
        if task_id:  # asynchronous: any worker answers its status
            for _ in range(600):
                async with aiohttp.ClientSession() as fresh, fresh.get(f"{url}/v1/ingest/{task_id}") as r:
                    state = (await r.json())["status"]
                if state in ("succeeded", "failed"):
                    break
                await asyncio.sleep(0.05)
            assert state == "succeeded"
    assert set(await _search(url, 12)) == {200}
    async with aiohttp.ClientSession() as http, http.get(f"{url}/metrics") as r:
        text = await r.text()
    assert "\nfabric_workers_scraped 2\n" in text
    assert 'worker="0"' in text
    assert 'worker="1"' in text

    os.kill(workers[0], signal.SIGKILL)
    for _ in range(600):  # the supervisor notices within its poll and starts another
        now = _children(proc.pid)
        if len(now) == 2 and workers[0] not in now:
            break
        await asyncio.sleep(0.05)
    assert len(now) == 2
    assert workers[0] not in now
    assert set(await _search(url, 6)) == {200}  # the other worker answers while the new one starts

    proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(proc.wait, 60) == 0
    assert all(_gone(pid) for pid in now)


def _gone(pid: int) -> bool:
    """The process exited (no entry, or a zombie its parent has not reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


async def test_workers_stop_when_the_supervisor_is_killed(supervisor: tuple[subprocess.Popen[str], str]) -> None:
    """SIGKILL gives the supervisor no time to stop its workers: they notice they were orphaned and exit."""
    proc, _ = supervisor
    workers = _children(proc.pid)
    assert len(workers) == 2
    proc.kill()
    await asyncio.to_thread(proc.wait, 30)
    for _ in range(600):
        if all(_gone(pid) for pid in workers):
            break
        await asyncio.sleep(0.05)
    assert all(_gone(pid) for pid in workers)


def test_workers_that_cannot_start_stop_the_service(tmp_path: Path) -> None:
    """A home held by a single-process service: every worker fails at start-up, and after three quick exits in
    a row the supervisor stops with an error instead of restarting them forever."""
    home = tmp_path / "home"
    alone = _start(home, _port())
    try:
        assert alone.stdout is not None
        assert "serving on" in alone.stdout.readline()
        started = time.monotonic()
        argv = ["--home", str(home), "serve", "--port", str(_port()), "--workers", "2"]
        sup = subprocess.run(
            [sys.executable, "-m", "fabric.cli", *argv], cwd=str(ROOT), env=_env(), capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        assert sup.returncode != 0
        assert "exited 3 times in a row" in sup.stderr
        assert time.monotonic() - started < 300
    finally:
        alone.terminate()
        alone.wait()
        if alone.stdout is not None:
            alone.stdout.close()


def test_public_api() -> None:
    assert set(mod.__all__) == {"QUICK_EXIT_S", "Supervisor", "child_argv", "listen_socket", "watch_parent"}
