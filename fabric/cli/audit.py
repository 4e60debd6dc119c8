"""``fabric audit [--entry-id ID] [--since TIME] [--limit N] [--after SEQ] [--tenant NAME] [--json]``.

Prints the audit history of the home (:mod:`fabric.ingest.audit`): entries and graph triples created, updated or
deleted,
with the tenant, key id and task that did it, oldest first. ``--since`` takes an ISO 8601 time or date (UTC when no
offset is given); ``--after`` continues from the ``next_after`` of a previous page. The CLI reads the ``default``
tenant's history (``<home>/audit.sqlite``) unless ``--tenant`` names another, whose history is in its own folder
(``<home>/tenants/<tenant>/audit.sqlite``, as ``GET /v1/audit`` reads it; ``--home <home>/tenants/<tenant>`` means
the same).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add the ``audit`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser("audit", help="show the audit history of entries and triples")
    p.add_argument("--entry-id", dest="entry_id", help="only this entry (chunk id or entry id)")
    p.add_argument("--since", help="only records at or after this ISO 8601 time")
    p.add_argument("--limit", type=int, default=100, help="records per page (1..1000, default 100)")
    p.add_argument("--after", type=int, default=0, help="continue after this record number")
    p.add_argument("--tenant", default="default", help="tenant whose history to show (default: default)")
    p.add_argument("--json", action="store_true", help="print the page as JSON")
    p.set_defaults(func=run)


def _line(r: Any) -> str:
    shown = "; ".join(f"({s}) -{p}-> ({o})" for s, p, o in r.triples[:3])
    more = f" (+{len(r.triples) - 3} more)" if len(r.triples) > 3 else ""
    what = f"{r.entry_id}: {shown}{more}" if r.triples else r.entry_id
    who = " ".join(f"{k}={v}" for k, v in (("key", r.key_id), ("task", r.task_id)) if v) or r.via
    return f"{r.seq:>6} {r.ts} {r.action:<8} {r.subject:<6} {what}  [{r.source}; {who}]"


def run(args: argparse.Namespace) -> int:
    """Print one page of the history; returns the exit code."""
    from fabric.cli.search import home_and_tenant, load_cli_settings
    from fabric.core.errors import QueryError
    from fabric.core.tenants import tenant_home
    from fabric.ingest.audit import AuditLog, parse_since
    from fabric.serve.openapi import MAX_AUDIT_LIMIT

    if not 1 <= args.limit <= MAX_AUDIT_LIMIT:
        raise QueryError("limit", f"must be in [1, {MAX_AUDIT_LIMIT}], got {args.limit}")
    if args.after < 0:
        raise QueryError("after", f"must be >= 0, got {args.after}")
    try:
        since = parse_since(args.since) if args.since else None
    except ValueError as exc:
        raise QueryError("since", str(exc)) from None
    settings, tenant = home_and_tenant(load_cli_settings(args), args.tenant)
    log = AuditLog(tenant_home(settings.home, tenant))
    try:
        page = log.page(tenant, entry_id=args.entry_id, since=since, after=args.after, limit=args.limit)
    finally:
        log.close()
    if args.json:
        print(json.dumps({"records": [r.to_dict() for r in page.records], "next_after": page.next_after}, indent=2))
        return 0
    if not page.records:
        print("no audit records")
    for record in page.records:
        print(_line(record))
    if page.next_after is not None:
        print(f"more: fabric audit --after {page.next_after}")
    return 0
