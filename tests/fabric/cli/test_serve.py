"""``fabric serve``: argument parsing, and one live subprocess reached over MCP (the routes themselves are covered
by tests/fabric/serve/test_service.py and tests/fabric/serve/mcp/test_http.py)."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import socket
import sys
import weakref
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from fabric.cli import build_parser, main
from fabric.cli.serve import check_bind, freeze_heap, is_loopback
from fabric.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]


class TestServeCommand:
    def test_defaults(self) -> None:
        """serve binds 127.0.0.1:8080 by default."""
        args = build_parser().parse_args(["serve"])
        assert (args.host, args.port) == ("127.0.0.1", 8080)

    def test_host_and_port(self) -> None:
        """--host and --port are honoured."""
        args = build_parser().parse_args(["serve", "--host", "0.0.0.0", "--port", "9000"])
        assert (args.host, args.port) == ("0.0.0.0", 9000)


async def test_live_serve_answers_mcp_over_http(tmp_path: Path) -> None:
    """A real ``fabric serve`` subprocess (default embedded lanes) answers the SDK's streamable HTTP client at /mcp."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("FABRIC_HOME", None)
    args = ["-m", "fabric.cli", "--home", str(tmp_path / "home"), "serve", "--port", str(port)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *args, cwd=str(ROOT), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    try:
        assert proc.stdout is not None
        banner = (await proc.stdout.readline()).decode()
        assert "MCP at /mcp" in banner, banner
        url = f"http://127.0.0.1:{port}/mcp"
        entries = [
            {"id": "e-42", "title": "deployment", "text": "Use blue-green deploys for zero-downtime releases."},
            {"id": "e-7", "title": "bread", "text": "Bread needs flour, water and salt."},
        ]
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            ingested = await session.call_tool("ingest", {"entries": entries})
            assert json.loads(ingested.content[0].text)["status"] == "succeeded"
            result = await session.call_tool("query", {"topic": "deployment strategy", "limit": 1})
        assert result.content[0].text == "Found 2 entries; showing top 1 by hybrid score."
        assert json.loads(result.content[1].resource.text)["items"][0]["id"] == "e-42"
    finally:
        proc.terminate()
        await proc.wait()


class TestBindCheck:
    @pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"])
    def test_loopback_without_keys_is_allowed(self, host: str) -> None:
        """Loopback addresses serve open (tenant default) with no key."""
        assert is_loopback(host)
        check_bind(host, 0, insecure=False)

    @pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.4", "example.org", ""])
    def test_other_addresses_need_keys_or_insecure(self, host: str) -> None:
        """A non-loopback address with no key is refused naming the remedies; keys or --insecure allow it."""
        with pytest.raises(ConfigError, match="--insecure"):
            check_bind(host, 0, insecure=False)
        check_bind(host, 1, insecure=False)
        check_bind(host, 0, insecure=True)

    def test_serve_refuses_before_opening_anything(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """`fabric serve --host 0.0.0.0` with an empty home exits 2 with the message (no engine is built)."""
        assert main(["--home", str(tmp_path), "serve", "--host", "0.0.0.0", "--port", "1"]) == 2
        assert "refusing to listen" in capsys.readouterr().err

    def test_limit_flags(self) -> None:
        """--rate, --burst and --max-concurrent default to the seed's 100/s per tenant."""
        args = build_parser().parse_args(["serve"])
        assert (args.rate, args.burst, args.max_concurrent, args.insecure) == (100.0, 200, 32, False)

    def test_workers_count_and_share_of_the_cores(self) -> None:
        """--workers defaults to 1, 0 means one per usable core, a negative count is refused; each worker's default
        admission runs its share of the cores (3 per core of it, one process alone 2 per core) and queues as many
        as the whole service would; limits given explicitly apply per worker as they are."""
        from fabric.cli.serve import _limit_configs, worker_count
        from fabric.serve.limits.admission import WORKER_ACTIVE_PER_CORE, AdmissionConfig, usable_cores

        assert build_parser().parse_args(["serve"]).workers == 1
        assert (worker_count(1), worker_count(3), worker_count(0)) == (1, 3, usable_cores())
        with pytest.raises(ConfigError, match="--workers"):
            worker_count(-1)
        args = build_parser().parse_args(["serve"])
        _, alone = _limit_configs(args)
        _, shared = _limit_configs(args, workers=usable_cores())
        assert alone.max_active == 0  # resolved from the cores by the service
        whole = AdmissionConfig().resolved(usable_cores())
        assert WORKER_ACTIVE_PER_CORE == 3
        assert (shared.max_active, shared.max_queue) == (3, whole.max_queue)  # one core each, the service's queue
        _, halves = _limit_configs(args, workers=2)
        assert halves.max_active == 3 * max(1, usable_cores() // 2)
        explicit = build_parser().parse_args(["serve", "--max-active", "3", "--max-queue", "5"])
        _, given = _limit_configs(explicit, workers=usable_cores())
        assert (given.max_active, given.max_queue) == (3, 5)
        _, active_only = _limit_configs(build_parser().parse_args(["serve", "--max-active", "3"]), workers=2)
        assert (active_only.max_active, active_only.max_queue) == (3, 6)  # twice the active given, as before
        assert active_only.hand_back  # workers share a socket: a busy one hands its connections back
        assert _limit_configs(args, workers=2)[1].hand_back
        assert not alone.hand_back


class TestFreezeHeap:
    def test_start_up_objects_leave_the_collectors_reach(self) -> None:
        """What exists when the site starts is frozen (a full collection no longer walks it); what a query makes
        later is still collected, reference cycles included."""

        class Node:
            def __init__(self) -> None:
                self.me = self

        start_up = Node()
        try:
            frozen = freeze_heap()
            assert frozen == gc.get_freeze_count() > 0
            assert not any(o is start_up for o in gc.get_objects())  # frozen objects are not tracked by generations
            later = Node()
            gone = weakref.ref(later)
            del later
            gc.collect()
            assert gone() is None
        finally:
            gc.unfreeze()


@pytest.fixture(params=["postgres", "sqlite"])
def any_state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """``FABRIC_STATE_URL`` of a fresh PostgreSQL database, or of a local state folder (replicas on one host)."""
    if request.param == "postgres":
        return str(request.getfixturevalue("state_url"))
    return f"sqlite://{tmp_path / 'replicas'}"


class TestTwoServeProcesses:
    """Two real ``fabric serve`` processes on one home and one shared state (``FABRIC_STATE_URL``): a PostgreSQL
    database, or a local folder of SQLite files and file locks."""

    @staticmethod
    def _env(state_url: str, **extra: str) -> dict[str, str]:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "FABRIC_STATE_URL": state_url, **extra}
        env |= {"FABRIC__lanes__vector__enabled": "false", "FABRIC__ingest__sync_max_entries": "0"}
        for name in ("FABRIC_HOME", "FABRIC_CRASH_AT", "FABRIC_CURSOR_SECRET"):
            if name not in extra:
                env.pop(name, None)
        return env

    async def _start(self, home: Path, env: dict[str, str]) -> tuple[asyncio.subprocess.Process, str]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        args = ["-m", "fabric.cli", "--home", str(home), "serve", "--port", str(port)]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, *args, cwd=str(ROOT), env=env, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        assert proc.stdout is not None
        banner = (await proc.stdout.readline()).decode()
        assert "serving on" in banner, banner
        return proc, f"http://127.0.0.1:{port}"

    @staticmethod
    def _cli(home: Path, env: dict[str, str], *argv: str) -> str:
        import subprocess

        done = subprocess.run(
            [sys.executable, "-m", "fabric.cli", "--home", str(home), *argv], cwd=str(ROOT), env=env,
            capture_output=True, text=True, check=True, timeout=120,
        )  # fmt: skip
        return done.stdout

    async def test_kill_a_mid_task_b_finishes_it_and_state_is_shared(self, tmp_path: Path, any_state_url: str) -> None:
        """Keys made by the CLI hold on both; a cursor from A pages on B; a key revoked by the CLI is refused by B;
        A killed (SIGKILL at its first store write) mid-task: B repairs, runs it again (attempt 2), it succeeds."""
        import aiohttp

        home, env = tmp_path / "home", self._env(any_state_url)
        for role, name in (("writer", "w.key"), ("reader", "r.key")):
            self._cli(
                home, env, "keys", "create", "--tenant", "acme", "--role", role, "--token-file", str(tmp_path / name)
            )
        writer = {"Authorization": "Bearer " + (tmp_path / "w.key").read_text()}
        reader = {"Authorization": "Bearer " + (tmp_path / "r.key").read_text()}
        a, url_a = await self._start(home, self._env(any_state_url, FABRIC_CRASH_AT="write.sqlite_fts"))
        b, url_b = await self._start(home, self._env(any_state_url, FABRIC__ingest__replica_poll_s="3600"))
        try:
            async with aiohttp.ClientSession() as http:

                async def finished(task_id: str) -> dict[str, object]:
                    for _ in range(3000):
                        async with http.get(f"{url_b}/v1/ingest/{task_id}", headers=writer) as r:
                            body: dict[str, object] = await r.json()
                        if body["status"] in ("succeeded", "failed"):
                            return body
                        await asyncio.sleep(0.02)
                    raise AssertionError(body)

                words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
                small = [
                    {"id": f"s-{i}", "text": f"Canary releases shift {w} traffic {w} {w}."} for i, w in enumerate(words)
                ]
                async with http.post(f"{url_b}/v1/ingest", json={"entries": small}, headers=writer) as r:
                    assert r.status == 202, await r.text()
                    first = await finished(str((await r.json())["task_id"]))
                assert first["status"] == "succeeded", first
                query = {"query": "canary releases traffic", "top_k": 2, "lanes": ["keyword"]}
                async with http.post(f"{url_a}/v1/search", json=query, headers=reader) as r:
                    page = await r.json()
                async with http.post(
                    f"{url_b}/v1/search", json={**query, "cursor": page["next_cursor"]}, headers=reader
                ) as r:
                    assert r.status == 200, await r.text()
                    assert {i["id"] for i in (await r.json())["items"]}.isdisjoint({i["id"] for i in page["items"]})

                big = [{"id": f"b-{i}", "text": f"Blue-green deploys switch release {i} at once."} for i in range(200)]
                async with http.post(f"{url_a}/v1/ingest", json={"entries": big}, headers=writer) as r:
                    assert r.status == 202, await r.text()
                    task_id = str((await r.json())["task_id"])
                assert await asyncio.wait_for(a.wait(), 120) == -9  # A died at its first store write
                async with http.get(f"{url_b}/v1/ingest/{task_id}", headers=writer) as r:
                    assert (await r.json())["status"] == "running"  # as A left it
                wake = [{"id": "w-1", "text": "wake up"}]  # a submission wakes B's worker (it polls hourly here)
                async with http.post(f"{url_b}/v1/ingest", json={"entries": wake}, headers=writer) as r:
                    assert r.status == 202
                    woke = str((await r.json())["task_id"])
                done = await finished(task_id)
                assert (await finished(woke))["status"] == "succeeded"
                assert (done["status"], done["attempts"]) == ("succeeded", 2), done
                report = done["report"]
                assert isinstance(report, dict)
                assert report["docs"] == 200
                check = json.loads(
                    self._cli(home / "tenants" / "acme", env, "check", "--json")
                )  # after the takeover: stores agree
                assert (check["agree"], check["pending"]) == (True, 0), check
                assert check["ledger"] == check["stores"]["sqlite_fts"]["count"] == 6 + 200 + 1, check

                key_id = (tmp_path / "r.key").read_text().split("_")[1]
                assert "revoked" in self._cli(home, env, "keys", "revoke", key_id)
                statuses = []
                for _ in range(100):  # B's guard caches a verified key for 5 s
                    async with http.get(f"{url_b}/v1/ingest/{task_id}", headers=reader) as r:
                        statuses.append(r.status)
                    if r.status == 401:
                        break
                    await asyncio.sleep(0.1)
                assert statuses[-1] == 401
        finally:
            for proc in (a, b):
                if proc.returncode is None:
                    proc.terminate()
                await proc.wait()


def test_serve_on_a_full_disk_says_so_in_one_line(tmp_path: Path) -> None:
    """``fabric serve`` over a home on a disk that takes no more writes: a real subprocess whose every file write
    fails (RLIMIT_FSIZE 0, SIGXFSZ ignored: EFBIG, as a full disk's writes fail with ENOSPC; SQLite cannot even
    open its WAL files). The home's lock is still taken (its holder record is skipped), and the start-up that cannot
    open the stores ends with exit 1 and one line saying why, never a traceback."""
    import subprocess

    home = tmp_path / "home"
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"id": "a", "text": "alpha"}\n')
    env = {**os.environ, "FABRIC__embeddings__backend": "none", "FABRIC_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("FABRIC_HOME", None)
    cli = [sys.executable, "-m", "fabric.cli", "--home", str(home)]
    subprocess.run([*cli, "ingest", str(notes), "--json"], cwd=str(ROOT), env=env, capture_output=True, check=True)
    full = ["sh", "-c", 'trap "" XFSZ; ulimit -f 0; exec "$@"', "sh", *cli, "serve", "--port", "0"]
    done = subprocess.run(full, cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stderr
    assert "fabric: error: cannot start: the home's stores cannot be written: OperationalError: disk I/O error" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr
    assert "home_lock_holder_unrecorded" in done.stderr + done.stdout
