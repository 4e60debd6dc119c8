"""``fabric serve`` argument parsing (serving itself is covered by tests/fabric/test_service.py)."""

from __future__ import annotations

from fabric.cli import build_parser


class TestServeCommand:
    def test_defaults(self) -> None:
        """serve binds 127.0.0.1:8080 by default."""
        args = build_parser().parse_args(["serve"])
        assert (args.host, args.port) == ("127.0.0.1", 8080)

    def test_host_and_port(self) -> None:
        """--host and --port are honoured."""
        args = build_parser().parse_args(["serve", "--host", "0.0.0.0", "--port", "9000"])
        assert (args.host, args.port) == ("0.0.0.0", 9000)
