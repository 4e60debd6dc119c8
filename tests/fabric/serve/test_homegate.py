"""The service's hold on its home: the writability probe (a really read-only folder), ``/readyz`` going not ready
while the stores cannot be written, the start-up repair shown in ``/readyz``, and a second service refused."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

import fabric.serve.homegate as mod
from fabric.ingest.homelock import HomeInUseError
from fabric.ingest.ledger import LEDGER_FILE, Ledger
from fabric.ingest.provenance import Provenance
from fabric.query.engine import Engine
from fabric.serve.homegate import HomeGate, unwritable
from fabric.serve.service import GATE_KEY, create_app
from fabric.settings import load_settings
from lanes.base import LaneResources
from lanes.fake import FakeLane


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """Make ``folder`` really read-only: permissions for a normal user; a read-only bind mount for root (who
    writes through permissions). Skips when neither is possible."""
    if os.geteuid() != 0:
        mode = folder.stat().st_mode
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(mode)
        return
    try:
        subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("running as root without mount privileges: cannot make a folder read-only")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True, capture_output=True)
        yield
    finally:
        subprocess.run(["umount", str(folder)], check=False, capture_output=True)


def _engine(home: Path) -> Engine:
    settings = load_settings(env={"FABRIC_HOME": str(home)})
    return Engine(settings, lanes={"keyword": FakeLane(name="keyword", hits=3)}, resources=LaneResources(home=home))


class TestProbe:
    def test_writable_home(self, tmp_path: Path) -> None:
        """A normal folder is writable, and the probe leaves no file behind."""
        assert unwritable(tmp_path) is None
        assert list(tmp_path.iterdir()) == []

    def test_read_only_home(self, tmp_path: Path) -> None:
        """A read-only folder is reported with the reason."""
        home = tmp_path / "home"
        home.mkdir()
        with read_only(home):
            reason = unwritable(home)
        assert reason is not None
        assert f"cannot write in {home}" in reason

    def test_missing_home(self, tmp_path: Path) -> None:
        """A home that vanished cannot be written."""
        assert unwritable(tmp_path / "gone") is not None


class TestReadiness:
    async def test_readyz_is_not_ready_while_the_home_is_read_only(self, tmp_path: Path) -> None:
        """/readyz answers 503 naming the problem while the home is read-only, and 200 again once it is not."""
        home = tmp_path / "home"
        async with TestClient(TestServer(create_app(_engine(home)), host="127.0.0.1")) as client:
            assert (await client.get("/readyz")).status == 200
            client.app[GATE_KEY]._probe = None  # no cached answer
            with read_only(home):
                resp = await client.get("/readyz")
                body = await resp.json()
            assert resp.status == 503
            assert body["stores"]["writable"] is False
            assert "cannot write" in body["stores"]["error"]
            client.app[GATE_KEY]._probe = None
            assert (await client.get("/readyz")).status == 200

    async def test_startup_repair_runs_before_ready(self, tmp_path: Path) -> None:
        """A ledger left pending by a crash is rolled back at start-up, and /readyz reports what was repaired."""
        home = tmp_path / "home"
        led = Ledger(home / LEDGER_FILE)
        led.mark_pending([("x1", "x1", "jsonl:lost", "h", Provenance("operator"))], [])
        led.close()
        async with TestClient(TestServer(create_app(_engine(home)), host="127.0.0.1")) as client:
            body = await (await client.get("/readyz")).json()
        assert body["status"] == "ready"
        assert body["stores"]["startup_repair"]["rolled_back"] == 1

    async def test_second_service_on_one_home_is_refused(self, tmp_path: Path) -> None:
        """A second app on a home a running app holds fails to start, naming the holder; the first keeps serving."""
        home = tmp_path / "home"
        async with TestClient(TestServer(create_app(_engine(home)), host="127.0.0.1")) as first:
            second = TestClient(TestServer(create_app(_engine(home)), host="127.0.0.1"))
            with pytest.raises(HomeInUseError, match=f"in use by pid {os.getpid()}"):
                await second.start_server()
            await second.close()
            assert (await first.get("/readyz")).status == 200


async def test_gate_is_not_ready_before_it_opens(tmp_path: Path) -> None:
    """Before the lock and the start-up repair the gate says why it is not ready."""
    ok, body = await HomeGate(tmp_path).ready()
    assert not ok
    assert "not locked" in body["error"]


def test_public_api() -> None:
    """The module exports the gate, the probe and its cache time."""
    assert set(mod.__all__) == {"PROBE_TTL_S", "Exclusive", "HomeGate", "repair_stores", "unwritable"}
