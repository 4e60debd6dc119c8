"""``fabric check [--repair] [--tenant NAME] [--json]``: do the stores hold the same chunks as the ledger?
(:mod:`fabric.ingest.check`)

Prints, per store, the ids it holds, the ids the ledger expects there and the differences (missing, extra, with a
few ids), the ledger rows a crash left pending, and whether everything agrees. Exit 0 when the stores agree
(after the repair, with ``--repair``), 1 when they do not, 2 for a bad home or configuration.

``--tenant`` checks another tenant's stores (``--home <home>/tenants/<tenant>`` means the same). ``--repair`` takes the
home's lock (:mod:`fabric.ingest.homelock`: refused, exit 3, while a service or an ingest writes the home, its
tenants' folders included) and repairs from the ledger; ``fabric serve`` runs the same repair over every tenant at
start-up before ``/readyz`` says ready.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fabric.ingest.check import CheckReport
    from fabric.settings import Settings

__all__ = ["register", "render"]


def register(sub: Any) -> None:
    """Add the ``check`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser("check", help="verify that every store agrees with the ledger")
    p.add_argument("--repair", action="store_true", help="repair disagreeing stores from the ledger")
    p.add_argument("--tenant", default="default", help="whose stores to check (default: default, the home)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_run)


async def _check(settings: Settings, tenant: str, repair: bool) -> CheckReport:
    from fabric.core.tenants import tenant_home
    from fabric.embed.embeddings import build_embedder
    from fabric.ingest.check import check_stores
    from fabric.ingest.writers import build_writers
    from lanes.base import LaneResources

    home = tenant_home(settings.home, tenant)
    embedder = build_embedder(settings.embeddings, settings.cache_dir)  # names the vector store's file
    writers = build_writers(settings, LaneResources(home=home, tenant=tenant, embedder=embedder))
    try:
        return await check_stores(home, writers, repair=repair, vectors=embedder is not None)
    finally:
        for w in writers:
            await w.aclose()


def render(report: CheckReport, home: str) -> list[str]:
    """The human-readable report, one line per item."""
    lines = [f"fabric check: {home}"]
    if report.before is not None:
        b = report.before
        lines.append(f"  before repair: {'agree' if b['agree'] else 'disagree'}, {b['pending']} pending ledger rows")
        for name, s in b["stores"].items():
            lines.append(f"    {name:<14} holds {s['count']:>7}  expected {s['expected']:>7}  "
                         f"missing {s['missing']:>6}  extra {s['extra']:>6}")  # fmt: skip
        lines.append(
            "  repaired: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in (report.repaired or {}).items())
        )
    lines.append(f"  ledger: {report.ledger} chunks done, {report.pending} pending (interrupted writes or deletes)")
    for name, s in report.stores.items():
        line = (f"  {name:<16} holds {s.count:>7}  expected {s.expected:>7}  "
                f"missing {len(s.missing):>6}  extra {len(s.extra):>6}")  # fmt: skip
        if s.missing:
            line += "  e.g. missing " + ", ".join(s.missing[:3])
        if s.extra:
            line += "  e.g. extra " + ", ".join(s.extra[:3])
        lines.append(line)
    lines.extend(f"  {name}: not checked (the backend cannot list its ids)" for name in report.unchecked)
    lines.extend(f"  {name}: error: {err}" for name, err in report.errors.items())
    for source, n in sorted(report.incomplete.items()):
        lines.append(f"  incomplete: {n} chunks of {source} are not in every store (ingest it again to complete)")
    if report.agree:
        lines.append("  the stores agree with the ledger")
    else:
        hint = "" if report.repaired is not None else " (run `fabric check --repair`)"
        lines.append(f"  the stores DISAGREE with the ledger{hint}")
    return lines


def _run(args: argparse.Namespace) -> int:
    from fabric.cli.search import home_and_tenant, load_cli_settings
    from fabric.core.errors import ConfigError
    from fabric.core.tenants import tenant_home
    from fabric.ingest.homelock import HomeLock

    settings, tenant = home_and_tenant(load_cli_settings(args), args.tenant)
    home = tenant_home(settings.home, tenant)
    if not home.is_dir():
        raise ConfigError(f"home {home} does not exist (nothing was ingested there; see --home and --tenant)")
    if args.repair:
        with HomeLock(settings.home, "fabric check --repair"):
            report = asyncio.run(_check(settings, tenant, True))
    else:
        report = asyncio.run(_check(settings, tenant, False))
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, sort_keys=True))
    else:
        print("\n".join(render(report, str(home))))
    return 0 if report.agree else 1
