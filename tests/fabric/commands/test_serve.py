"""``fabric serve``: argument parsing, and one live subprocess reached over MCP (the routes themselves are covered
by tests/fabric/test_service.py and tests/fabric/test_mcp_http.py)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from fabric.cli import build_parser, main
from fabric.commands.serve import check_bind, is_loopback
from fabric.errors import ConfigError

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
