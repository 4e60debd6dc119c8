"""``fabric serve`` argument parsing (serving itself is covered by tests/fabric/test_service.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric.cli import build_parser, main
from fabric.commands.serve import check_bind, is_loopback
from fabric.errors import ConfigError


class TestServeCommand:
    def test_defaults(self) -> None:
        """serve binds 127.0.0.1:8080 by default."""
        args = build_parser().parse_args(["serve"])
        assert (args.host, args.port) == ("127.0.0.1", 8080)

    def test_host_and_port(self) -> None:
        """--host and --port are honoured."""
        args = build_parser().parse_args(["serve", "--host", "0.0.0.0", "--port", "9000"])
        assert (args.host, args.port) == ("0.0.0.0", 9000)


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
