"""``fabric ingest PATH [--format beir|markdown|jsonl] [--json]``: load a source into every embedded store.

Idempotent: unchanged chunks are not rewritten, changed ones are updated, removed ones deleted from every
store (see :mod:`fabric.ingest.pipeline`). Shows a progress bar per stage (load, chunk, embed, write) on
stderr and a summary; ``--json`` prints the summary as JSON only. Bad paths or formats exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from fabric.ingest.pipeline import Progress

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add the ``ingest`` subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser("ingest", help="ingest a BEIR corpus, Markdown folder or JSONL")
    parser.add_argument("path", help="folder or file to ingest")
    parser.add_argument("--format", choices=("beir", "markdown", "jsonl"), help="source format (default: detect)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from fabric.commands.progress import RichProgress
    from fabric.commands.search import load_cli_settings
    from fabric.errors import IngestError
    from fabric.ingest.loaders import detect_format
    from fabric.ingest.run import run_ingest

    path = Path(args.path)
    if not path.exists():
        raise IngestError(f"path: {path} does not exist")
    fmt = args.format or detect_format(path)

    settings = load_cli_settings(args)
    if args.json:
        report = asyncio.run(run_ingest(settings, path, fmt))
        print(json.dumps(report.to_dict(), indent=2, sort_keys=True))
        return 0
    progress = RichProgress()
    with progress.bar:
        report = asyncio.run(run_ingest(settings, path, fmt, cast("Progress", progress)))
    d = report.to_dict()
    print(f"ingested {d['source']} ({d['format']}) into {settings.home}")
    print(
        f"  docs {d['docs']}  chunks {d['chunks']}  created {d['created']}  updated {d['updated']}  "
        f"repaired {d['repaired']}  unchanged {d['unchanged']}  deleted {d['deleted']}"
    )
    print(f"  embeddings: {d['embeddings']} ({d['embedded']} embedded)")
    print("  stores: " + ", ".join(f"{k}={v}" for k, v in d["stores"].items()))
    stages = ("load", "chunk", "embed", "write")
    print("  seconds: " + "  ".join(f"{k} {d['seconds'].get(k, 0):.2f}" for k in stages))
    print("  docs/s:  " + "  ".join(f"{k} {d['docs_per_s'].get(k) or 0:.0f}" for k in stages))
    return 0
