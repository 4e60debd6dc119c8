"""``fabric delete --id ID [--id ID ...] | --source SOURCE [--tenant NAME] [--json]``: remove entries from every
store.

An id matches a chunk id or an entry's doc id (all chunks of a Markdown file); a source is named as ingestion and
the audit history name it (``jsonl:notes.jsonl``, ``api``) or by its path. The chunks leave the keyword, vector and
graph stores (triples and edges included) and the ledger, and the audit history records them as deleted
(:mod:`fabric.ingest.deletion`). Nothing matching exits 2 naming the id or source; a store that cannot be written
exits 1 naming it (the entries stay marked for deletion: run the command again).

``--tenant`` deletes from another tenant's stores (``--home <home>/tenants/<tenant>`` means the same); the audit
records name that tenant and the local operator (key id ``operator``). The command takes the home's lock
(:mod:`fabric.ingest.homelock`): while a service or an ingest writes the home, or a tenant's folder in it, it is
refused (exit 3).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add the ``delete`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser("delete", help="delete entries by id or by source from every store")
    p.add_argument("--id", dest="ids", action="append", default=[], metavar="ID", help="entry id (repeatable)")
    p.add_argument("--source", help="every entry of this source (e.g. jsonl:notes.jsonl, api, or a path)")
    p.add_argument("--tenant", default="default", help="whose stores to delete from (default: default, the home)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Delete and print the report; returns the exit code."""
    from fabric.cli.search import home_and_tenant, load_cli_settings
    from fabric.core.errors import IngestError
    from fabric.core.tenants import tenant_home
    from fabric.embed.embeddings import build_embedder
    from fabric.ingest.audit import OPERATOR_KEY_ID, Actor, acting_as
    from fabric.ingest.deletion import delete_entries
    from fabric.ingest.homelock import HomeLock
    from fabric.ingest.writers import build_writers
    from lanes.base import LaneResources

    ids = [i for i in args.ids if i.strip()]
    if not ids and not (args.source or "").strip():
        raise IngestError("delete: give --id ID (repeatable) or --source SOURCE")
    settings, tenant = home_and_tenant(load_cli_settings(args), args.tenant)
    home = tenant_home(settings.home, tenant)

    async def go() -> Any:
        # the vector stores are named after the embedding model: the embedder is built for its name, never run
        embedder = build_embedder(settings.embeddings, settings.cache_dir)
        writers = build_writers(settings, LaneResources(home=home, tenant=tenant, embedder=embedder))
        try:
            return await delete_entries(home, writers, ids=ids, source=args.source or None)
        finally:
            for writer in writers:
                await writer.aclose()

    with HomeLock(settings.home, "fabric delete"), acting_as(Actor(tenant=tenant, key_id=OPERATOR_KEY_ID)):
        report = asyncio.run(go())
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, sort_keys=True))
    else:
        print(f"deleted {report.deleted} of {report.matched} chunk(s): {', '.join(report.ids[:20])}"
              + (" ..." if len(report.ids) > 20 else ""))  # fmt: skip
        for store, status in sorted(report.stores.items()):
            print(f"  {store}: {status}")
    if not report.ok:
        failed = ", ".join(k for k, v in sorted(report.stores.items()) if v != "ok")
        print(f"fabric: error: delete could not write {failed}; run it again to finish", file=sys.stderr)
        return 1
    return 0
