"""The open-mode Host and Origin check (DNS rebinding): which names are loopback, how headers parse, what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

import fabric.serve.hosts as mod
from fabric.cli import main
from fabric.core.errors import ConfigError
from fabric.serve.hosts import HostPolicy, host_name, is_loopback_host


@pytest.mark.parametrize(
    ("value", "name"),
    [("localhost", "localhost"), ("LocalHost:8080", "localhost"), ("127.0.0.1:80", "127.0.0.1"), ("[::1]", "::1"),
     ("[::1]:8080", "::1"), ("::1", "::1"), ("fabric.lan:1", "fabric.lan"), ("", None), ("localhost:", None),
     ("localhost:http", None), ("[::1]x", None), ("[::1", None), ("[]:80", None)],
)  # fmt: skip
def test_host_name(value: str, name: str | None) -> None:
    """The host of a Host header value, lower-case, without port or brackets; malformed values are None."""
    assert host_name(value) == name


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("localhost", True), ("127.0.0.1", True), ("127.255.0.9", True), ("::1", True), ("[::1]", True),
     ("::ffff:127.0.0.1", True), ("0.0.0.0", False), ("", False), ("10.0.0.1", False),
     ("localhost.evil.example", False), ("127.0.0.1.nip.io", False), ("::ffff:10.0.0.1", False)],
)  # fmt: skip
def test_is_loopback_host(host: str, loopback: bool) -> None:
    """Only localhost, 127.0.0.0/8 and ::1 (IPv4-mapped included) are loopback; names that merely contain them
    are not."""
    assert is_loopback_host(host) is loopback


def _refusal(policy: HostPolicy, host: str | None, origin: str | None) -> tuple[int, str] | None:
    refused = policy.check(host, origin)
    return None if refused is None else refused[:2]


class TestPolicy:
    def test_the_default_allows_loopback_only(self) -> None:
        """421 for a foreign or missing Host, 403 for a foreign Origin, None for loopback."""
        policy = HostPolicy()
        assert _refusal(policy, "127.0.0.1:8080", "http://localhost:3000") is None
        assert _refusal(policy, "evil.example", None) == (421, "host")
        assert _refusal(policy, None, None) == (421, "host")
        assert _refusal(policy, "localhost", "http://evil.example") == (403, "origin")
        assert _refusal(policy, "localhost", "ftp://localhost") == (403, "origin")

    def test_allowed_names_and_the_bind_address(self) -> None:
        """--allow-host names (port ignored) and a specific bind address are allowed; a wildcard bind adds nothing."""
        policy = HostPolicy.of(["Fabric.LAN:8080", "[fd00::5]"], bind="192.168.1.9")
        assert policy.allowed == frozenset({"fabric.lan", "fd00::5", "192.168.1.9"})
        assert policy.check("fabric.lan:9000", "https://fabric.lan") is None
        assert policy.check("192.168.1.9:8080", None) is None
        assert policy.check("other.lan", None) is not None
        assert HostPolicy.of([], bind="0.0.0.0").allowed == frozenset()
        assert HostPolicy.of([], bind="::").allowed == frozenset()

    def test_any_host(self) -> None:
        """'*' turns the check off."""
        assert HostPolicy.of(["*"]).check("evil.example", "http://evil.example") is None

    @pytest.mark.parametrize("bad", ["", "http://fabric.lan/", "a b", "fabric.lan:x"])
    def test_bad_names_are_config_errors(self, bad: str) -> None:
        """A URL, a path or an empty name is refused naming the flag."""
        with pytest.raises(ConfigError, match="--allow-host"):
            HostPolicy.of([bad])

    def test_fabric_serve_refuses_a_bad_allow_host(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """fabric serve --allow-host with a URL exits 2 with one line, before binding anything."""
        assert main(["--home", str(tmp_path), "serve", "--port", "0", "--allow-host", "http://x/"]) == 2
        assert "--allow-host" in capsys.readouterr().err


def test_public_api() -> None:
    """The module exports the policy and its helpers."""
    assert set(mod.__all__) == {"ANY_HOST", "HostPolicy", "host_name", "is_loopback_host"}
