"""``fabric serve [--host 127.0.0.1] [--port 8080]``: the HTTP API (:mod:`fabric.service`) over the engine."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add the ``serve`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser("serve", help="serve the HTTP API (search, ingestion, metrics)")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="TCP port (default 8080)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the engine from settings and serve until interrupted."""
    from aiohttp import web

    from fabric.commands.search import load_cli_settings
    from fabric.engine import Engine
    from fabric.logs import configure_logging
    from fabric.service import create_app

    configure_logging(level="DEBUG" if getattr(args, "verbose", False) else "INFO")
    settings = load_cli_settings(args)
    banner = (
        f"fabric: serving on http://{args.host}:{args.port} "
        "(POST /v1/search, POST /v1/ingest, GET /v1/ingest/<id>, MCP at /mcp, /healthz, /readyz, /metrics)"
    )
    app = create_app(Engine(settings), host=args.host)

    def started(_message: str) -> None:  # called by aiohttp once the site listens (after start-up checks)
        print(banner, flush=True)

    web.run_app(app, host=args.host, port=args.port, print=started, access_log=None)
    return 0
