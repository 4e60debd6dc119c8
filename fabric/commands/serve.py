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
    p.add_argument(
        "--max-connections",
        type=int,
        default=0,
        help="open connections above which new ones get 503 (default: the descriptor limit less 25%%)",
    )
    p.add_argument("--header-timeout-s", type=float, default=10.0, help="request head deadline (default 10 s)")
    p.add_argument("--body-timeout-s", type=float, default=30.0, help="request body deadline (default 30 s)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the engine from settings and serve until interrupted."""
    import asyncio

    from fabric.commands.search import load_cli_settings
    from fabric.engine import Engine
    from fabric.logs import configure_logging
    from fabric.serverlimits import ServerLimits, serve_app
    from fabric.service import create_app

    configure_logging(level="DEBUG" if getattr(args, "verbose", False) else "INFO")
    settings = load_cli_settings(args)
    banner = (
        f"fabric: serving on http://{args.host}:{args.port} "
        "(POST /v1/search, POST /v1/ingest, GET /v1/ingest/<id>, MCP at /mcp, /healthz, /readyz, /metrics)"
    )
    engine = Engine(settings)
    app = create_app(engine, host=args.host)
    limits = ServerLimits(
        header_timeout_s=args.header_timeout_s, body_timeout_s=args.body_timeout_s, max_connections=args.max_connections
    )

    def started(_name: str) -> None:  # called once the site listens (after start-up checks)
        print(banner, flush=True)

    # fabric.serverlimits: head/body read timeouts and a connection cap below the descriptor limit
    asyncio.run(
        serve_app(app, host=args.host, port=args.port, limits=limits, registry=engine.metrics.registry, started=started)
    )
    return 0
