"""The home lock: one holder at a time (in-process and across processes), the refusal names the holder's pid, and
a holder killed with SIGKILL leaves no stale lock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import fabric.ingest.homelock as mod
from fabric.cli import main
from fabric.ingest.homelock import LOCK_FILE, HomeInUseError, HomeLock, lock_holder, owning_home

ROOT = Path(__file__).resolve().parents[3]

_HOLD = """
import sys, time
from pathlib import Path
from fabric.ingest.homelock import HomeLock
lock = HomeLock(Path(sys.argv[1]), "fabric serve")
lock.acquire()
print("held", flush=True)
time.sleep(600)
"""


def _holder(home: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(home)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    return proc


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.stdout is not None
    proc.stdout.close()


class TestLock:
    def test_second_holder_is_refused_naming_the_first(self, tmp_path: Path) -> None:
        """While one lock holds the home another is refused with the holder's pid and command; release frees it."""
        first = HomeLock(tmp_path, "fabric serve")
        first.acquire()
        assert first.held
        with pytest.raises(HomeInUseError, match=rf"in use by pid {os.getpid()} \(fabric serve, since "):
            HomeLock(tmp_path, "fabric ingest").acquire()
        first.release()
        with HomeLock(tmp_path, "fabric ingest") as second:
            assert second.held
            assert lock_holder(tmp_path)["command"] == "fabric ingest"
        assert not second.held

    def test_another_process_holds_it_until_killed(self, tmp_path: Path) -> None:
        """A lock held by another process refuses this one; SIGKILL of that process frees it (no stale lock)."""
        proc = _holder(tmp_path)
        try:
            with pytest.raises(HomeInUseError) as err:
                HomeLock(tmp_path, "fabric serve").acquire()
            assert err.value.holder["pid"] == proc.pid
            assert f"pid {proc.pid}" in str(err.value)
        finally:
            _kill(proc)
        with HomeLock(tmp_path, "fabric serve") as lock:
            assert lock.held

    def test_cli_ingest_is_refused_while_a_service_holds_the_home(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """``fabric ingest`` on a home another process holds exits 2 with one line naming the pid, no traceback."""
        corpus = tmp_path / "e.jsonl"
        corpus.write_text(json.dumps({"id": "a", "text": "alpha"}) + "\n")
        home = tmp_path / "home"
        proc = _holder(home)
        try:
            code = main(["--home", str(home), "ingest", str(corpus), "--json"])
        finally:
            _kill(proc)
        err = capsys.readouterr().err
        assert code == 3  # busy: another process holds the home
        assert f"in use by pid {proc.pid} (fabric serve" in err
        assert "Traceback" not in err

    def test_unreadable_lock_file_still_refuses(self, tmp_path: Path) -> None:
        """A holder whose lock file content is garbage is still refused (pid shown as ?)."""
        first = HomeLock(tmp_path, "fabric serve")
        first.acquire()
        (tmp_path / LOCK_FILE).write_text("not json")
        with pytest.raises(HomeInUseError, match=r"pid \?"):
            HomeLock(tmp_path, "x").acquire()
        first.release()


class TestTenantFolders:
    def test_a_tenants_folder_is_locked_by_its_home(self, tmp_path: Path) -> None:
        """A lock asked for ``<home>/tenants/acme`` is the home's: refused while the home is held, and the other
        way round."""
        home = tmp_path / "home"
        folder = home / "tenants" / "acme"
        folder.mkdir(parents=True)
        refused = rf"home {home} is in use by pid {os.getpid()} \(fabric serve"
        with HomeLock(home, "fabric serve"), pytest.raises(HomeInUseError, match=refused):
            HomeLock(folder, "fabric ingest").acquire()
        with HomeLock(folder, "fabric ingest"), pytest.raises(HomeInUseError, match=r"\(fabric ingest"):
            HomeLock(home, "fabric serve").acquire()
        assert not (folder / LOCK_FILE).exists()

    def test_owning_home(self, tmp_path: Path) -> None:
        """A tenant's folder belongs to the home holding a lock file; any other folder is a home of its own."""
        home = tmp_path / "home"
        (home / "tenants" / "acme").mkdir(parents=True)
        (home / LOCK_FILE).write_text("")
        assert owning_home(home / "tenants" / "acme") == (home, "acme")
        assert owning_home(home / "tenants" / "Not A Tenant") == (home / "tenants" / "Not A Tenant", "default")
        assert owning_home(home / "tenants" / "default") == (home / "tenants" / "default", "default")
        lone = tmp_path / "srv" / "tenants" / "acme"  # no lock file two levels up: not a fabric home's tenant
        assert owning_home(lone) == (lone, "default")

    @pytest.mark.parametrize(
        "command", [["ingest", "{corpus}", "--json"], ["delete", "--id", "a"], ["check", "--repair"]]
    )
    @pytest.mark.parametrize("address", ["--home <home>/tenants/acme", "--tenant acme"])
    def test_cli_writers_are_refused_on_a_tenant_while_a_service_holds_the_home(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        command: list[str], address: str,
    ) -> None:  # fmt: skip
        """``fabric ingest``, ``delete`` and ``check --repair`` on a tenant of a home another process holds exit 3
        (busy) with one line naming the holder, and write nothing in the tenant's folder."""
        monkeypatch.setenv("FABRIC__embeddings__backend", "none")
        corpus = tmp_path / "e.jsonl"
        corpus.write_text(json.dumps({"id": "a", "text": "alpha"}) + "\n")
        home = tmp_path / "home"
        folder = home / "tenants" / "acme"
        folder.mkdir(parents=True)
        args = [a.replace("{corpus}", str(corpus)) for a in command]
        if address == "--tenant acme":
            argv = ["--home", str(home), *args, "--tenant", "acme"]
        else:
            argv = ["--home", str(folder), *args]
        proc = _holder(home)
        try:
            code = main(argv)
        finally:
            _kill(proc)
        err = capsys.readouterr().err
        assert code == 3, err
        assert err.startswith(f"fabric: error: home {home} is in use by pid {proc.pid} (fabric serve")
        assert err.count("\n") == 1
        assert list(folder.iterdir()) == []


def test_public_api() -> None:
    """The module exports the lock, its error, the file name, the holder reader and the owning home."""
    assert set(mod.__all__) == {"LOCK_FILE", "HomeInUseError", "HomeLock", "lock_holder", "owning_home"}
