"""Shared fixtures: network blocking for unit tests, structlog reset, and user folders of the test session's own.

The platform's user folders (settings file, default home) point into a temporary folder for the whole session,
subprocesses included, so a developer's own ``~/.config/retrieval-fabric/config.toml`` or home never changes a test;
the model cache stays the checkout's ``.cache/fabric`` (shared with ``make gate``) unless ``FABRIC_CACHE_DIR`` says
otherwise.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from fabric.core.logs import unconfigure_logging
from tests.support.postgres import PostgresServer, skip_reason, start_server

_LOOPBACK = ("127.", "::1", "localhost")

_USER_DIRS = tempfile.mkdtemp(prefix="fabric-tests-")
atexit.register(shutil.rmtree, _USER_DIRS, True)
for _var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
    os.environ[_var] = os.path.join(_USER_DIRS, _var.lower())
os.environ.setdefault("FABRIC_CACHE_DIR", str(Path(__file__).resolve().parents[1] / ".cache" / "fabric"))


@pytest.fixture(autouse=True)
def _block_network(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unit tests may only connect to loopback; tests marked ``integration`` may go anywhere."""
    if request.node.get_closest_marker("integration"):
        return
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: object) -> object:
        host = address[0] if isinstance(address, tuple) else str(address)
        if isinstance(host, str) and (host.startswith(_LOOPBACK) or self.family == socket.AF_UNIX):
            return real_connect(self, address)  # type: ignore[arg-type]
        raise RuntimeError(f"network access blocked in unit tests: {address!r}")

    monkeypatch.setattr(socket.socket, "connect", guarded)


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    """Each test starts with structlog's default configuration and the process's logging unconfigured (a test that
    runs the CLI in-process configures it)."""
    yield
    structlog.reset_defaults()
    unconfigure_logging()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server on loopback for the session (skips, saying why, without the binaries)."""
    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)
    server = start_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def state_url(postgres_server: PostgresServer) -> str:
    """``FABRIC_STATE_URL`` of a fresh database on the session's PostgreSQL server."""
    return postgres_server.create_database()
