"""``fabric serve [--host 127.0.0.1] [--port 8080] [--insecure] [--allow-host NAME ...] [--rate R --burst B
--max-concurrent N] [--max-active A --max-queue Q --max-wait-ms W] [--workers N]``.

The HTTP API (:mod:`fabric.serve.service`) over the engine. In a home where no API key was ever created
(``fabric keys create``) the service is open, as the single tenant ``default``; it then refuses to listen on
anything but a loopback address unless started with ``--insecure``, and answers only requests whose ``Host`` (and
``Origin``) name loopback, the bound address or an ``--allow-host`` name (:mod:`fabric.serve.hosts`). Once keys
were created, none active locks it (:mod:`fabric.serve.auth`). Limits apply per tenant
(:mod:`fabric.serve.limits.tenants`), and searches beyond the service's capacity are shed with a fast 503
(:mod:`fabric.serve.limits.admission`). ``--workers N`` runs N such processes on the one address, replicas of one
another on this host (:mod:`fabric.serve.workers`, ``docs/replicas.md``).
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import gc
import os
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

from fabric.core.errors import ConfigError

__all__ = ["check_bind", "freeze_heap", "is_loopback", "key_state", "register", "run"]


def register(sub: Any) -> None:
    """Add the ``serve`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser("serve", help="serve the HTTP API (search, ingestion, metrics)")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=port_number, default=8080, help="TCP port (default 8080)")
    p.add_argument(
        "--max-connections",
        type=int,
        default=0,
        help="open connections above which new ones get 503 (default: the descriptor limit less 25%%)",
    )
    p.add_argument(
        "--max-connections-per-address",
        type=int,
        default=0,
        help="open connections one client address may hold (default 0: half of --max-connections)",
    )
    p.add_argument("--header-timeout-s", type=float, default=10.0, help="request head deadline (default 10 s)")
    p.add_argument("--body-timeout-s", type=float, default=30.0, help="request body deadline (default 30 s)")
    p.add_argument(
        "--insecure", action="store_true", help="allow a non-loopback address without any API key (open to all)"
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="without API keys, also answer requests to this host name (repeatable; '*': any, no DNS rebinding check)",
    )
    p.add_argument("--rate", type=float, default=100.0, help="requests per second per tenant (default 100)")
    p.add_argument("--burst", type=int, default=200, help="token bucket size per tenant (default 200)")
    p.add_argument("--max-concurrent", type=int, default=32, help="requests in flight per tenant (default 32)")
    p.add_argument("--max-active", type=int, default=0, help="searches running at once (default 0: 2 per usable core)")
    p.add_argument(
        "--max-queue",
        type=int,
        default=0,
        help="searches waiting for a slot (default 0: 2 x max-active; each of --workers: the service's)",
    )
    p.add_argument(
        "--max-wait-ms", type=float, default=100.0, help="longest wait for a slot before a 503 (default 100)"
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="service processes on the one address (default 1; 0: one per usable core); docs/replicas.md",
    )
    p.add_argument("--listen-fd", type=int, default=None, help=argparse.SUPPRESS)  # a worker's inherited socket
    p.add_argument("--worker-index", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--workers-dir", default="", help=argparse.SUPPRESS)  # the supervisor's private folder
    p.set_defaults(func=run)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only the loopback interface (``localhost``, 127.0.0.0/8, ``::1``)."""
    from fabric.serve.hosts import is_loopback_host

    return is_loopback_host(host)


def key_state(store: Any, *, quiet: bool = False) -> Any:
    """The key store's :class:`fabric.serve.keys.store.KeyState`, or None when it cannot be read (said on stderr
    unless ``quiet``: the service starts, fails closed and answers 503 until it is repaired)."""
    from fabric.serve.keys.store import KeyStoreError

    try:
        return store.state()
    except KeyStoreError as exc:
        if not quiet:
            print(f"fabric: {exc}", file=sys.stderr)
        return None


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


def worker_count(requested: int) -> int:
    """``--workers``: ``requested``, or one per usable core for 0.

    Raises:
        ConfigError: a negative count.
    """
    if requested < 0:
        raise ConfigError(f"--workers must be 0 (one per usable core) or more, got {requested}")
    if requested == 0:
        from fabric.serve.limits.admission import usable_cores

        return usable_cores()
    return requested


def run(args: argparse.Namespace) -> int:
    """Build the engine from settings and serve until interrupted (or supervise ``--workers`` such services)."""
    workers = worker_count(args.workers)
    if workers > 1 and args.listen_fd is None:
        return _supervise(args, workers)
    return _serve(args)


def _limit_configs(args: argparse.Namespace, workers: int = 1) -> tuple[Any, Any]:
    """The tenant limits and the admission limits of one process.

    A worker's default admission runs its share of the cores (3 queries per core of it:
    ``fabric.serve.limits.admission.WORKER_ACTIVE_PER_CORE``) but keeps the whole service's queue: a keep-alive
    connection stays
    with the worker that accepted it, so from moment to moment one worker has more of the load than its share, and a
    queue cut to its share (4 a worker with 2 workers on 2 cores, against 8 for one process) refused requests whose
    wait would have been short (``queue_full`` at an admitted p95 of 55 ms, docs/replicas.md). The wait bound
    (``--max-wait-ms``) still caps every queued request. A busy worker also hands its connections back
    (``hand_back``: the next connection goes to the worker that accepts first)."""
    from fabric.serve.limits.admission import WORKER_ACTIVE_PER_CORE, AdmissionConfig, usable_cores
    from fabric.serve.limits.tenants import LimitConfig

    try:
        tenant_limits = LimitConfig(rate=args.rate, burst=args.burst, concurrency=args.max_concurrent)
        admission = AdmissionConfig(max_active=args.max_active, max_queue=args.max_queue, max_wait_ms=args.max_wait_ms)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if workers > 1:
        cores = usable_cores()
        if not admission.max_active and not admission.max_queue:  # the defaults: its cores, the service's queue
            admission = dataclasses.replace(admission, max_queue=admission.resolved(cores).max_queue)
        share = max(1, cores // workers)
        admission = dataclasses.replace(admission.resolved(share, per_core=WORKER_ACTIVE_PER_CORE), hand_back=True)
    return tenant_limits, admission


def _supervise(args: argparse.Namespace, workers: int) -> int:
    """``--workers N``: bind once, check what every worker would check, then run the workers (fabric.serve.workers)."""
    from fabric.cli.search import load_cli_settings
    from fabric.core.logs import configure_logging
    from fabric.serve.hosts import HostPolicy
    from fabric.serve.keys.store import KeyStore
    from fabric.serve.state.local import local_folder, local_url
    from fabric.serve.workers import Supervisor

    configure_logging(level="DEBUG" if getattr(args, "verbose", False) else "INFO")
    settings = load_cli_settings(args)
    _limit_configs(args)
    HostPolicy.of(args.allow_host, bind=args.host)
    url = settings.state_url or local_url(settings.home / "replicas")
    if local_folder(url) is not None:  # the workers keep their keys in the home (a database's: checked by each)
        state = key_state(KeyStore(settings.home))
        check_bind(args.host, 1 if state is None or state.mode != "open" else 0, insecure=args.insecure)
    sock = bind(args.host, args.port)
    env = {**os.environ, "FABRIC_STATE_URL": url}
    if settings.home:
        env["FABRIC_HOME"] = str(settings.home)
    with sock, tempfile.TemporaryDirectory(prefix="fabric-workers-") as private:
        argv = [*getattr(args, "cli_argv", sys.argv[1:]), "--workers-dir", private]
        return Supervisor(argv, sock, workers, env).run()


class AddressInUseError(ConfigError):
    """The address ``fabric serve`` should listen on is taken (the CLI exits 3, as for a home in use)."""


def bind(host: str, port: int) -> Any:
    """A listening socket on ``host:port``, bound before anything heavy loads.

    Raises:
        AddressInUseError: another process listens there.
        ConfigError: the address cannot be bound for another reason.
    """
    import errno

    from fabric.serve.workers import listen_socket

    try:
        return listen_socket(host, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise AddressInUseError(
                f"{host}:{port} is in use by another process: stop it or choose another --port"
            ) from None
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def port_number(text: str) -> int:
    """``--port``: a TCP port, 0 (any free one) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 0 to 65535, got {port}")
    return port


def _serve(args: argparse.Namespace) -> int:
    """One service process (alone, or a worker on the supervisor's socket)."""
    import asyncio
    import socket

    from fabric.cli.search import load_cli_settings
    from fabric.core.logs import configure_logging
    from fabric.query.engine import Engine
    from fabric.serve.auth import LOCKED_MESSAGE
    from fabric.serve.hosts import HostPolicy
    from fabric.serve.limits.server import ServerLimits
    from fabric.serve.replicas import Replica, key_store
    from fabric.serve.service import create_app, default_guard
    from fabric.serve.worker_metrics import WorkerSet

    configure_logging(level="DEBUG" if getattr(args, "verbose", False) else "INFO")
    settings = load_cli_settings(args)
    hosts = HostPolicy.of(args.allow_host, bind=args.host)  # a bad --allow-host fails before anything loads
    # FABRIC_STATE_URL: one of several replicas sharing tasks, keys, rate buckets and cursor secret (docs/replicas.md)
    replica = Replica(settings.state_url, settings.home) if settings.state_url else None
    if replica is not None:
        replica.state.open_sync()
    state = key_state(key_store(settings.home, replica), quiet=args.worker_index > 0)
    mode = state.mode if state is not None else "unavailable"
    check_bind(args.host, 0 if mode == "open" else 1, insecure=args.insecure)  # locked or unreadable: closed
    worker = args.listen_fd is not None
    tenant_limits, admission = _limit_configs(args, worker_count(args.workers) if worker else 1)
    sock = socket.socket(fileno=args.listen_fd) if worker else bind(args.host, args.port)  # before the engine loads
    port = sock.getsockname()[1]
    if mode == "open" and args.worker_index == 0:
        where = "every interface (--insecure)" if not is_loopback(args.host) else "loopback"
        print(f"fabric: no API key configured: open to any client on {where}, as tenant 'default'", file=sys.stderr)
    elif mode == "locked" and args.worker_index == 0:
        print(f"fabric: {LOCKED_MESSAGE}", file=sys.stderr)
    workers = f" ({worker_count(args.workers)} workers)" if worker else ""
    banner = (
        f"fabric: serving on http://{args.host}:{port}{workers} "
        "(POST /v1/search, POST /v1/ingest, GET /v1/ingest/<id>, DELETE /v1/entries, GET /v1/audit, POST /v1/cite, "
        "MCP at /mcp, /healthz, /readyz, /metrics; the API: /openapi.json)"
    )
    engine = Engine(settings)
    open_allowed = is_loopback(args.host) or bool(args.insecure)
    guard = default_guard(engine, tenant_limits, replica, open_allowed=open_allowed, hosts=hosts)
    app = create_app(engine, guard=guard, host=args.host, admission=admission, replica=replica)
    if worker and args.workers_dir:
        _add_worker_metrics(app, WorkerSet(Path(args.workers_dir), args.worker_index, worker_count(args.workers)))
    limits = ServerLimits(
        header_timeout_s=args.header_timeout_s, body_timeout_s=args.body_timeout_s,
        max_connections=args.max_connections, max_connections_per_address=args.max_connections_per_address,
    )  # fmt: skip

    def started(_name: str) -> None:  # called once the site listens (after start-up checks)
        freeze_heap()
        print(banner if args.worker_index == 0 else f"fabric: worker {args.worker_index} ready", flush=True)

    return _until_stopped(lambda: asyncio.run(_run_site(app, args, limits, engine.metrics.registry, started, sock,
                                                         worker=worker)))  # fmt: skip


def _until_stopped(serve: Any) -> int:
    """Run ``serve()``; a home whose stores cannot be opened (a full disk) is one line and exit 1, no traceback."""
    try:
        serve()
    except (OSError, sqlite3.Error) as exc:
        if isinstance(exc, OSError) and exc.errno not in _DISK_ERRNOS:
            raise
        print(f"fabric: error: cannot start: the home's stores cannot be written: {type(exc).__name__}: {exc} (is "
              "the disk full or read-only? free space and start again)", file=sys.stderr)  # fmt: skip
        return 1
    return 0


_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS, errno.EIO})
"""Errors of a disk that takes no more writes (full, over quota, read-only, failing)."""


async def _run_site(
    app: Any, args: argparse.Namespace, limits: Any, registry: Any, started: Any, sock: Any, *, worker: bool
) -> None:
    """Serve ``app`` on ``sock`` until stopped (a worker also stops when its supervisor goes away)."""
    import asyncio

    from fabric.serve.limits.server import serve_app
    from fabric.serve.workers import watch_parent

    stop = asyncio.Event()
    watch = asyncio.create_task(watch_parent(os.getppid(), stop)) if worker else None
    try:
        # fabric.serve.limits.server: head/body read timeouts and a connection cap below the descriptor limit
        await serve_app(
            app, host=args.host, port=args.port, limits=limits, registry=registry, started=started, stop=stop,
            sock=sock,
        )  # fmt: skip
    finally:
        if watch is not None:
            watch.cancel()


def _add_worker_metrics(app: Any, workers: Any) -> None:
    """A worker's ``/metrics`` answers for every worker and its ``/readyz`` for the whole service; its own registry
    and readiness are served to them on its socket."""
    from fabric.serve.service import ENGINE_KEY, own_readiness
    from fabric.serve.worker_metrics import WORKERS_KEY, serve_own

    app[WORKERS_KEY] = workers
    runners = []

    async def ready() -> bool:
        return (await own_readiness(app))[0]

    async def start(app: Any) -> None:
        runners.append(await serve_own(workers, app[ENGINE_KEY].metrics.registry, ready))

    async def stop(_app: Any) -> None:
        for runner in runners:
            await runner.cleanup()

    app.on_startup.append(start)
    app.on_cleanup.append(stop)


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
