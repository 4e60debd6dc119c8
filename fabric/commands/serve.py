"""``fabric serve [--host 127.0.0.1] [--port 8080] [--insecure] [--rate R --burst B --max-concurrent N] [--max-active A
--max-queue Q --max-wait-ms W]``.

The HTTP API (:mod:`fabric.service`) over the engine. With no API key in the home (``fabric keys create``) the
service is open, as the single tenant ``default``; it then refuses to listen on anything but a loopback address
unless started with ``--insecure``. Limits apply per tenant (:mod:`fabric.limits`), and searches beyond the
service's capacity are shed with a fast 503 (:mod:`fabric.admission`).
"""

from __future__ import annotations

import argparse
import gc
import ipaddress
import sys
from typing import Any

from fabric.errors import ConfigError

__all__ = ["check_bind", "freeze_heap", "is_loopback", "register", "run"]


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
    p.add_argument(
        "--insecure", action="store_true", help="allow a non-loopback address without any API key (open to all)"
    )
    p.add_argument("--rate", type=float, default=100.0, help="requests per second per tenant (default 100)")
    p.add_argument("--burst", type=int, default=200, help="token bucket size per tenant (default 200)")
    p.add_argument("--max-concurrent", type=int, default=32, help="requests in flight per tenant (default 32)")
    p.add_argument("--max-active", type=int, default=0, help="searches running at once (default 0: 2 per usable core)")
    p.add_argument("--max-queue", type=int, default=0, help="searches waiting for a slot (default 0: 2 x max-active)")
    p.add_argument(
        "--max-wait-ms", type=float, default=100.0, help="longest wait for a slot before a 503 (default 100)"
    )
    p.set_defaults(func=run)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only the loopback interface (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False  # a host name or "" (every interface): not provably loopback


def check_bind(host: str, active_keys: int, *, insecure: bool) -> None:
    """Refuse to serve without keys on a non-loopback address unless ``insecure``.

    Raises:
        ConfigError: no key exists, ``host`` is not loopback and ``insecure`` is not set.
    """
    if active_keys or is_loopback(host) or insecure:
        return
    raise ConfigError(
        f"refusing to listen on {host!r} with no API key: anyone reaching the port could search and ingest. "
        "Create one with `fabric keys create --tenant NAME --role admin`, bind 127.0.0.1, or pass --insecure"
    )


def run(args: argparse.Namespace) -> int:
    """Build the engine from settings and serve until interrupted."""
    import asyncio

    from fabric.admission import AdmissionConfig
    from fabric.commands.search import load_cli_settings
    from fabric.engine import Engine
    from fabric.limits import LimitConfig
    from fabric.logs import configure_logging
    from fabric.replicas import Replica, key_store
    from fabric.serverlimits import ServerLimits, serve_app
    from fabric.service import create_app, default_guard

    configure_logging(level="DEBUG" if getattr(args, "verbose", False) else "INFO")
    settings = load_cli_settings(args)
    # FABRIC_STATE_URL: one of several replicas sharing tasks, keys, rate buckets and cursor secret (docs/replicas.md)
    replica = Replica(settings.state_url) if settings.state_url else None
    if replica is not None:
        replica.state.open_sync()
    keys = key_store(settings.home, replica).active_count()
    check_bind(args.host, keys, insecure=args.insecure)
    try:
        tenant_limits = LimitConfig(rate=args.rate, burst=args.burst, concurrency=args.max_concurrent)
        admission = AdmissionConfig(max_active=args.max_active, max_queue=args.max_queue, max_wait_ms=args.max_wait_ms)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if not keys:
        where = "every interface (--insecure)" if not is_loopback(args.host) else "loopback"
        print(f"fabric: no API key configured: open to any client on {where}, as tenant 'default'", file=sys.stderr)
    banner = (
        f"fabric: serving on http://{args.host}:{args.port} "
        "(POST /v1/search, POST /v1/ingest, GET /v1/ingest/<id>, DELETE /v1/entries, GET /v1/audit, POST /v1/cite, "
        "MCP at /mcp, /healthz, /readyz, /metrics; the API: /openapi.json)"
    )
    engine = Engine(settings)
    guard = default_guard(engine, tenant_limits, replica, open_allowed=is_loopback(args.host) or bool(args.insecure))
    app = create_app(engine, guard=guard, host=args.host, admission=admission, replica=replica)
    limits = ServerLimits(
        header_timeout_s=args.header_timeout_s, body_timeout_s=args.body_timeout_s, max_connections=args.max_connections
    )

    def started(_name: str) -> None:  # called once the site listens (after start-up checks)
        freeze_heap()
        print(banner, flush=True)

    # fabric.serverlimits: head/body read timeouts and a connection cap below the descriptor limit
    asyncio.run(
        serve_app(app, host=args.host, port=args.port, limits=limits, registry=engine.metrics.registry, started=started)
    )
    return 0


def freeze_heap() -> int:
    """Collect once, then move every object the start-up left (modules, the opened engine, its indexes and model
    sessions) out of the garbage collector's reach (:func:`gc.freeze`); the number of objects frozen.

    A serving process allocates per query and so runs full collections now and then; each one walked every
    start-up object again while holding the GIL, and every query waited. An engine on the 50K home: about 73,000
    tracked objects, 18-41 ms a full collection (3-4 in 300-600 queries); frozen, 1.3-1.7 ms. The frozen
    objects are never freed; they live as long as the process anyway. The service owns its process, so only
    ``fabric serve`` does this, never the engine that an orchestrator embeds.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
