"""Shared fixtures: network blocking for unit tests, structlog reset."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import structlog

from tests.support.postgres import PostgresServer, skip_reason, start_server

_LOOPBACK = ("127.", "::1", "localhost")


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
    """Each test starts with structlog's default configuration."""
    yield
    structlog.reset_defaults()


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
