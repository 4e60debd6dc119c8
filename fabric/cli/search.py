"""``fabric search "QUERY"``: run one query through the engine and print a table or the result JSON.

Options mirror the request fields (:mod:`fabric.query.validation`): ``--mode``, ``--top-k``, ``--cursor``,
``--budget-ms``, ``--strict``, ``--lanes a,b``, ``--fusion``, ``--weights semantic=2,graph=0.5``, ``--limit``
(another name for ``--top-k``), ``--route``, ``--constraint key=value`` (repeatable),
``--no-preflight``, ``--tenant NAME`` (search another tenant's stores; default ``default``, the home itself).
``--json`` prints ``SearchResult.to_dict()`` (the DESIGN.md shape); ``--explain`` adds,
per item, every score component and the item's rank in each lane. Bad input exits 2 with one line.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from fabric.core.errors import QueryError
from fabric.core.models import SearchRequest, SearchResult
from fabric.settings import Settings, load_settings

__all__ = [
    "empty_home_notice",
    "home_and_tenant",
    "load_cli_settings",
    "parse_constraints",
    "register",
    "run",
    "run_now",
]

T = TypeVar("T")


def register(sub: Any) -> None:
    """Add the ``search`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser("search", help="search every enabled lane and fuse the answers")
    p.add_argument("query", help="the query text")
    p.add_argument("--mode", help="simple | technical | research | multimedia")
    p.add_argument("--top-k", dest="top_k", help="items per page (default 10)")
    p.add_argument("--cursor", help="next_cursor of a previous page")
    p.add_argument("--budget-ms", dest="budget_ms", help="total budget in ms (default: the mode's)")
    p.add_argument("--strict", action="store_true", help="fail instead of returning a partial answer")
    p.add_argument("--lanes", help="comma-separated lanes to run (default: every enabled lane)")
    p.add_argument("--fusion", help="rrf | append_fill | score_minmax | score_dbsf | score_zscore")
    p.add_argument("--limit", help="items per page, another name for --top-k (give one of them)")
    p.add_argument("--weights", help="per-request lane weights, e.g. semantic=2,graph=0.5 (lanes or components)")
    p.add_argument(
        "--route", help="auto (default: [router] default_route) | all | dense | temporal | graph (docs/router.md)"
    )
    p.add_argument(
        "--constraint",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="time_range, sources, cost, depth or citations_required (repeatable)",
    )
    p.add_argument("--no-preflight", dest="no_preflight", action="store_true", help="skip pre-flight refinement")
    p.add_argument("--json", action="store_true", help="print the result JSON")
    p.add_argument("--tenant", default="default", help="whose stores to search (default: default, the home)")
    p.add_argument("--explain", action="store_true", help="show score components and per-lane ranks")
    p.set_defaults(func=run)


def load_cli_settings(args: argparse.Namespace) -> Settings:
    """Settings from the global ``--config``, ``--profile`` and ``--home`` options plus the environment."""
    env = dict(os.environ)
    if getattr(args, "home", None):
        env["FABRIC_HOME"] = str(args.home)
    config = getattr(args, "config", None)
    return load_settings(user_file=Path(config) if config else None, profile=getattr(args, "profile", None), env=env)


def home_and_tenant(settings: Settings, tenant: str) -> tuple[Settings, str]:
    """The settings over the home that holds ``settings.home``, and the tenant whose stores a command reads or writes:
    ``--home <home>/tenants/acme`` means ``--home <home> --tenant acme`` (:func:`fabric.ingest.homelock.owning_home`),
    so the lock, the audit records and the server stores' names are that tenant's.

    Raises:
        ConfigError: an invalid tenant name, or ``--tenant`` naming another tenant than the folder ``--home`` is.
    """
    from fabric.core.errors import ConfigError
    from fabric.core.tenants import DEFAULT_TENANT, check_tenant
    from fabric.ingest.homelock import owning_home

    check_tenant(tenant)
    home, owner = owning_home(settings.home)
    if owner == DEFAULT_TENANT:
        return settings, tenant
    if tenant not in (DEFAULT_TENANT, owner):
        raise ConfigError(f"--home {settings.home} is the folder of tenant {owner}, not of --tenant {tenant}")
    return dataclasses.replace(settings, home=home), owner


def parse_constraints(pairs: list[str]) -> dict[str, str]:
    """``["cost=low", "depth=research"]`` → a mapping (values are validated later)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise QueryError("constraints", f"expected KEY=VALUE, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def _request_data(args: argparse.Namespace) -> dict[str, Any]:
    data: dict[str, Any] = {"query": args.query}
    for key in ("mode", "top_k", "limit", "cursor", "budget_ms", "lanes", "fusion", "weights", "route"):
        value = getattr(args, key)
        if value is not None:
            data[key] = value
    if args.constraint:
        data["constraints"] = parse_constraints(args.constraint)
    if args.strict:
        data["strict"] = True
    if args.no_preflight:
        data["preflight"] = False
    return data


def empty_home_notice(home: Path) -> str | None:
    """What to tell a user whose home holds nothing ingested (missing or empty), or ``None`` when it holds chunks.

    ``fabric search`` prints it on stderr (and as ``notice`` in ``--json``) when a search finds nothing, so an
    empty result over an empty home is never silent.
    """
    from fabric.ingest.ledger import stored_chunks

    if stored_chunks(home):
        return None
    state = "does not exist" if not home.exists() else "holds no ingested documents"
    return (
        f"the home {home} {state}, so the embedded lanes have nothing to search; "
        f"run `fabric --home {home} demo` or `fabric --home {home} ingest PATH` first"
    )


async def _search(settings: Settings, request: SearchRequest, tenant: str = "default") -> SearchResult:
    from fabric.query.engine import Engine

    if tenant == "default":
        async with Engine(settings) as engine:
            return await engine.search(request)
    from fabric.query.lane_setup import needs_embedder
    from fabric.query.resources import close_resources, open_resources
    from fabric.serve.tenant_engines import tenant_resources

    shared = await open_resources(settings, embedder=needs_embedder(settings))
    try:
        scoped = tenant_resources(shared, settings.home, tenant)
        async with Engine(dataclasses.replace(settings, home=scoped.home), resources=scoped) as engine:
            return await engine.search(request)
    finally:
        await close_resources(shared)


def run(args: argparse.Namespace) -> int:
    """Validate, search, print; returns the exit code."""
    from fabric.core.tenants import tenant_home
    from fabric.query.validation import parse_request

    settings = load_cli_settings(args)
    request = parse_request(_request_data(args), settings)
    tenant = getattr(args, "tenant", "default")
    notice = empty_home_notice(tenant_home(settings.home, tenant))  # before the search creates the home's folders
    result = run_now(_search(settings, request, tenant))
    if result.items:
        notice = None
    if notice:
        print(f"fabric: {notice}", file=sys.stderr)
    if args.json:
        payload = result.to_dict()
        if notice:
            payload["notice"] = notice
        if args.explain:
            payload["explain"] = _explain(result)
        print(json.dumps(payload, indent=2, ensure_ascii=False))
    else:
        _print_tables(result, explain=args.explain)
    sys.stdout.flush()  # the answer leaves now, even if an abandoned lane thread delays the process exit
    return 0


def run_now(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on a fresh loop and return as soon as it is done.

    Unlike :func:`asyncio.run`, this does not join the default thread pool on the way out: a lane call
    abandoned in a hung worker thread must not hold back the answer (the thread is left to finish on its own).
    """
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        if pending:  # a brief chance to unwind; tasks that ignore cancellation are left behind
            loop.run_until_complete(asyncio.wait(pending, timeout=0.05))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def _explain(result: SearchResult) -> list[dict[str, Any]]:
    return [
        {
            "id": it.id,
            "score_total": it.score_total,
            "contributions": dict(result.contributions.get(it.id, {})),
            "scores": dict(it.scores),
            "ranks": dict(it.ranks),
        }
        for it in result.items
    ]


def _print_tables(result: SearchResult, *, explain: bool) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=True)
    title = f"{result.query!r} · {result.mode.value} · {result.total} found · trace {result.trace_id}"
    items = Table(title=title, expand=False)
    for col in ("#", "score", "title and snippet", "lanes"):
        items.add_column(col, overflow="fold")
    for i, it in enumerate(result.items, 1):
        snippet = " ".join(it.hit.text.split())[:160]
        items.add_row(str(i), f"{it.score_total:.4f}", f"[bold]{escape(it.hit.title[:80])}[/bold]\n{escape(snippet)}\n"
                      f"[dim]{escape(it.id)}[/dim]", ",".join(it.lanes))  # fmt: skip
    console.print(items)
    if explain:
        for i, it in enumerate(result.items, 1):
            comps = " ".join(f"{k}={v:.4f}" for k, v in sorted(it.scores.items()))
            ranks = " ".join(f"{lane}:{rank}" for lane, rank in sorted(it.ranks.items()))
            print(f"{i:>3}. {it.id}  total={it.score_total:.4f}  ranks {ranks}\n     {comps}")
    lanes = Table(title="lanes")
    for col in ("lane", "status", "provider", "latency_ms", "hits", "weight", "error"):
        lanes.add_column(col)
    for name, out in result.lanes.items():
        lanes.add_row(
            name,
            out.status.value,
            out.provider,
            f"{out.latency_ms:.1f}",
            str(len(out.hits)),
            f"{out.weight:.2f}",
            (out.error or "")[:80],
        )
    console.print(lanes)
    pf = result.preflight
    console.print(
        f"pre-flight: {'bypassed (' + str(pf.reason) + ')' if pf.bypassed else 'refined'} → {pf.refined_query!r}"
        f" · total {result.timings.get('total_ms', 0.0):.1f} ms · partial={str(result.partial).lower()}"
        f" · next_cursor={result.next_cursor or '-'}"
    )
    short = result.route.get("temporal_shortfall")
    if short:  # Temporal's hard year filter found fewer items than asked: said, never padded with other years
        lo, hi = short["years"]
        console.print(f"temporal: {short['found']} of {short['k']} items match the years {lo}-{hi}")
