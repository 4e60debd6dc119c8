"""``fabric mcp``: serve the MCP server (:mod:`fabric.serve.mcp.server`) over stdio, for agents that spawn it.

Stdout carries the protocol only: logs go to stderr (JSON lines, warnings and above unless ``-v``). The home is
locked and its stores repaired like ``fabric serve`` does (:mod:`fabric.serve.homegate`), then the engine and the
ingestion worker open before the first message is read (the embedding model loads then) and close when
the client closes the pipe.

Beside a running ``fabric serve`` (which holds the home) it serves **read-only**: ``query``, ``cite``, ``status`` and
the entry resource answer from the same stores, while ``ingest`` and ``task`` are tool errors naming the holder
(ingest through the service instead: ``POST /v1/ingest`` or its ``/mcp``). Example client configuration::

    {"mcpServers": {"fabric": {"command": "fabric", "args": ["--home", "/path/to/home", "mcp"]}}}
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register", "run", "serve_stdio"]


def register(sub: Any) -> None:
    """Add the ``mcp`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser("mcp", help="serve the MCP tools (query, ingest, cite, ...) on stdio")
    p.set_defaults(func=run)


async def serve_stdio(settings: Any) -> None:
    """Open the engine and ingestion tasks, serve MCP on stdin/stdout until the client leaves, close both; read-only
    when another process holds the home."""
    from fabric.ingest.homelock import HomeInUseError
    from fabric.serve.homegate import HomeGate

    gate = HomeGate(settings.home)
    try:
        gate.lock.acquire()  # it ingests: one owner per home, like fabric serve
    except HomeInUseError as exc:
        await _serve_read_only(settings, str(exc))
        return
    try:
        await _serve_owner(settings, gate)
    finally:
        gate.close()


async def _serve_owner(settings: Any, gate: Any) -> None:
    from fabric.query.engine import Engine
    from fabric.serve.mcp.server import build_server
    from fabric.serve.service import ingest_tasks

    engine = Engine(settings)
    tasks = ingest_tasks(engine)
    await engine.open()
    try:
        assert engine.resources is not None
        await gate.open_stores(settings, engine.resources)
        await tasks.start()
        try:
            await build_server(engine, tasks).run_stdio_async()
        finally:
            await tasks.aclose()
    finally:
        await engine.aclose()


async def _serve_read_only(settings: Any, holder: str) -> None:
    from fabric.core.logs import get_logger
    from fabric.query.engine import Engine
    from fabric.serve.mcp.server import build_server
    from fabric.serve.service import ingest_tasks

    reason = f"read-only: {holder.split(': only one', 1)[0]}; ingest through that service (POST /v1/ingest or /mcp)"
    get_logger(__name__).warning("mcp_read_only", reason=reason)
    engine = Engine(settings)
    await engine.open()
    try:
        await build_server(engine, ingest_tasks(engine), read_only=reason).run_stdio_async()
    finally:
        await engine.aclose()


def run(args: argparse.Namespace) -> int:
    """Serve until stdin closes."""
    import anyio

    from fabric.cli.search import load_cli_settings

    settings = load_cli_settings(args)
    anyio.run(serve_stdio, settings)
    return 0
