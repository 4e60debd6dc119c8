"""Crash tests: a real ``fabric ingest`` and a real ``fabric serve`` (subprocesses, loopback HTTP, MiniLM, the
embedded stores) killed with SIGKILL at each crash point of an ingest, then restarted: ``fabric check`` must find
the stores in agreement with the ledger every time, and the service's task must resume (never a 404).

The corpus is 300 short JSONL entries: two batches of the pipeline (256), so a kill after the first batch of a
stage leaves work half done. Embeddings are cached per module, so only the first run pays for MiniLM.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

import fabric.ingest.crashpoints as mod
from fabric.ingest.crashpoints import ENV, POINTS

ROOT = Path(__file__).resolve().parents[3]
N = 300
STORES = ("sqlite_fts", "numpy_flat", "sqlite_graph")
TOPICS = ("rivers", "compilers", "bread", "orbits", "vaccines", "glaciers", "sonnets", "bridges", "markets", "bees")


def _entries() -> list[dict[str, str]]:
    return [
        {"id": f"c{i:03d}", "title": f"note {i}", "text": f"Note {i} is about {TOPICS[i % 10]} and {TOPICS[i // 30]}."}
        for i in range(N)
    ]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One embedding cache for the module: the corpus is embedded once."""
    return tmp_path_factory.mktemp("cache")


def _env(cache: Path, crash: str | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "FABRIC_CACHE_DIR": str(cache)}
    for name in ("FABRIC_HOME", ENV):
        env.pop(name, None)
    if crash:
        env[ENV] = crash
    return env


def _cli(home: Path, cache: Path, *args: str, crash: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "fabric.cli", "--home", str(home), *args]
    return subprocess.run(cmd, cwd=ROOT, env=_env(cache, crash), capture_output=True, text=True, timeout=600)


def _check(home: Path, cache: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    done = _cli(home, cache, "check", "--json", *extra)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def _assert_agree_with_all(home: Path, cache: Path) -> dict[str, Any]:
    code, report = _check(home, cache)
    assert code == 0, report
    assert report["agree"], report
    assert report["pending"] == 0
    assert report["ledger"] == N
    assert {name: s["count"] for name, s in report["stores"].items()} == dict.fromkeys(STORES, N)
    return report


@pytest.mark.slow
@pytest.mark.parametrize("point", [p for p in POINTS if p != "spool"])
def test_cli_ingest_killed_then_checked_and_rerun(tmp_path: Path, cache: Path, point: str) -> None:
    """kill -9 of ``fabric ingest`` at a point: check sees the interrupted work, repairs it, the next run completes."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(e) + "\n" for e in _entries()))
    home = tmp_path / "home"
    killed = _cli(home, cache, "ingest", str(corpus), "--json", crash=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    code, before = _check(home, cache)
    assert (code, before["agree"]) == (1, False)
    assert before["pending"] > 0  # the crash left the ledger's write-ahead rows
    code, repaired = _check(home, cache, "--repair")
    assert code == 0, repaired
    assert repaired["agree"]
    assert repaired["repaired"]["rolled_back"] == before["pending"]
    again = _cli(home, cache, "ingest", str(corpus), "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["stores"] == dict.fromkeys(STORES, "ok")
    _assert_agree_with_all(home, cache)


class _Service:
    """A ``fabric serve`` subprocess on a free loopback port."""

    def __init__(self, home: Path, cache: Path, crash: str | None = None) -> None:
        self.home, self.cache, self.crash = home, cache, crash
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        args = ["-m", "fabric.cli", "--home", str(self.home), "serve", "--port", str(self.port)]
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, *args, cwd=str(ROOT), env=_env(self.cache, self.crash),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        assert self.proc.stdout is not None
        banner = (await asyncio.wait_for(self.proc.stdout.readline(), 300)).decode()
        assert "serving on" in banner, banner

    async def wait_killed(self) -> int:
        assert self.proc is not None
        return await asyncio.wait_for(self.proc.wait(), 300)

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            await asyncio.wait_for(self.proc.wait(), 60)


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as s:
        yield s


async def _submit(session: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    body = {"entries": _entries(), "async": True}
    async with session.post(f"{url}/v1/ingest", json=body, headers={"Idempotency-Key": "crash-test"}) as resp:
        assert resp.status == 202, await resp.text()
        data: dict[str, Any] = await resp.json()
        return data


async def _finished(session: aiohttp.ClientSession, url: str, task_id: str) -> dict[str, Any]:
    for _ in range(1200):
        async with session.get(f"{url}/v1/ingest/{task_id}") as resp:
            assert resp.status == 200, await resp.text()  # a task from before the restart is never a 404
            task: dict[str, Any] = await resp.json()
        if task["status"] in ("succeeded", "failed"):
            return task
        await asyncio.sleep(0.25)
    raise AssertionError(f"task {task_id} did not finish: {task}")


@pytest.mark.slow
@pytest.mark.parametrize("point", POINTS)
async def test_service_killed_then_restarted(
    tmp_path: Path, cache: Path, session: aiohttp.ClientSession, point: str
) -> None:
    """kill -9 of ``fabric serve`` at a point of an ingest task; the restart repairs the stores before it is
    ready, the task id answers and the task resumes to success; the spool is cleaned; the stores agree."""
    home = tmp_path / "home"
    crashing = _Service(home, cache, crash=point)
    await crashing.start()
    task_id: str | None = None
    try:
        task_id = (await _submit(session, crashing.url))["task_id"]
    except aiohttp.ClientError:
        assert point == "spool"  # the process died inside the request
    assert await crashing.wait_killed() == -signal.SIGKILL
    service = _Service(home, cache)
    await service.start()
    try:
        async with session.get(f"{service.url}/readyz") as resp:
            ready = await resp.json()
            assert resp.status == 200, ready
        if point != "spool":
            assert ready["stores"]["startup_repair"]["rolled_back"] > 0  # the crash left work the start-up undid
        if task_id is None:  # the client retries with the same key: one new task
            task_id = (await _submit(session, service.url))["task_id"]
        task = await _finished(session, service.url, task_id)
        assert task["status"] == "succeeded", task
        assert task["attempts"] == (1 if point == "spool" else 2)
        assert task["report"]["stores"] == dict.fromkeys(STORES, "ok")
    finally:
        await service.stop()
    assert not [p for p in (home / "spool").rglob("*") if p.is_file()]
    _assert_agree_with_all(home, cache)


def test_unset_point_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the variable (or naming another point) a crash point returns."""
    monkeypatch.delenv(ENV, raising=False)
    mod.crash_point("ledger")
    monkeypatch.setenv(ENV, "embed")
    mod.crash_point("ledger")


def test_public_api() -> None:
    """The module exports the variable name, the points and the hook."""
    assert set(mod.__all__) == {"ENV", "POINTS", "crash_point"}
