"""``fabric delete --id ID [--id ID ...] | --source SOURCE [--json]``: remove entries from every embedded store.

An id matches a chunk id or an entry's doc id (all chunks of a Markdown file); a source is named as ingestion and
the audit history name it (``jsonl:notes.jsonl``, ``api``) or by its path. The chunks leave the keyword, vector and
graph stores (triples and edges included) and the ledger, and the audit history records them as deleted
(:mod:`fabric.ingest.deletion`). Nothing matching exits 2 naming the id or source; a store that cannot be written
exits 1 naming it (the entries stay marked for deletion: run the command again).
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
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Delete and print the report; returns the exit code."""
    from fabric.cli.search import load_cli_settings
    from fabric.core.errors import IngestError
    from fabric.embed.embeddings import build_embedder
    from fabric.ingest.deletion import delete_entries
    from fabric.ingest.writers import build_writers
    from lanes.base import LaneResources

    ids = [i for i in args.ids if i.strip()]
    if not ids and not (args.source or "").strip():
        raise IngestError("delete: give --id ID (repeatable) or --source SOURCE")
    settings = load_cli_settings(args)
    # the vector stores are named after the embedding model: the embedder is built for its name, never run
    resources = LaneResources(home=settings.home, embedder=build_embedder(settings.embeddings, settings.cache_dir))

    async def go() -> Any:
        writers = build_writers(settings, resources)
        try:
            return await delete_entries(settings.home, writers, ids=ids, source=args.source or None)
        finally:
            for writer in writers:
                await writer.aclose()

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
