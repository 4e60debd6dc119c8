"""``fabric mcp``: serve the MCP server (:mod:`fabric.serve.mcp.server`) over stdio, for agents that spawn it.

Stdout carries the protocol only: logs go to stderr (JSON lines, warnings and above unless ``-v``). The home is
locked and its stores repaired like ``fabric serve`` does (:mod:`fabric.serve.homegate`), then the engine and the
ingestion worker open before the first message is read (the embedding model loads then) and close when
the client closes the pipe. Example client configuration::

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
    """Open the engine and ingestion tasks, serve MCP on stdin/stdout until the client leaves, close both."""
    from fabric.query.engine import Engine
    from fabric.serve.homegate import HomeGate
    from fabric.serve.mcp.server import build_server
    from fabric.serve.service import ingest_tasks

    engine = Engine(settings)
    tasks = ingest_tasks(engine)
    gate = HomeGate(settings.home)
    gate.lock.acquire()  # it ingests: one owner per home, like fabric serve
    try:
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
    finally:
        gate.close()


def run(args: argparse.Namespace) -> int:
    """Serve until stdin closes."""
    import anyio

    from fabric.cli.search import load_cli_settings

    settings = load_cli_settings(args)
    anyio.run(serve_stdio, settings)
    return 0
