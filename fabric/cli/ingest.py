"""``fabric ingest PATH [--format beir|markdown|jsonl] [--include GLOB]... [--exclude GLOB]... [--json]
[--tenant NAME]``: load a source into every store.

``--tenant`` writes another tenant's stores (what its API keys search; :mod:`fabric.core.tenants`); the default is
the single-user ``default`` tenant, in the home itself. ``--home <home>/tenants/<tenant>`` means the same as
``--home <home> --tenant <tenant>``. The audit history records the entries as the tenant's, written by the local
operator (key id ``operator``), so the tenant lists them in its audit and may delete them. While a service holds the
home (the tenants' folders included) the command is refused: exit 3.

Idempotent: unchanged chunks are not rewritten, changed ones are updated, removed ones deleted from every
store (see :mod:`fabric.ingest.pipeline`). Shows a progress bar per stage (load, chunk, embed, write) on
stderr and a summary; ``--json`` prints the summary as JSON only. Bad paths, formats or entries exit 2 (naming
file, line and field), and so does an id another source holds (the id-conflict rule of
:mod:`fabric.ingest.pipeline`). Any store that cannot be written (a Qdrant folder a running service holds, a
read-only store, a full disk: ``database or disk is full``, ``ENOSPC``) exits 1: the summary is still printed and
one line on stderr names each failed store and how many chunks the ledger keeps pending, never a traceback (the
next run repairs them from the ledger). Ids repeated inside the source are reported (last wins) with a warning.

``--include`` / ``--exclude`` (repeatable) narrow a Markdown folder to the files they admit, replacing ``[ingest]
include`` / ``exclude`` (:mod:`fabric.ingest.selection`: an exclude beats an include; an allowlist admitting none
of the folder's files, a bad glob, or one given for a BEIR or JSONL source exits 2 before anything is written). The
summary names the allowlist and counts each file's trust under the rule that decided it; a glob that matched no
file is a warning on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import json
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from fabric.ingest.report import IngestReport, Progress

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add the ``ingest`` subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser("ingest", help="ingest a BEIR corpus, Markdown folder or JSONL")
    parser.add_argument("path", help="folder or file to ingest")
    parser.add_argument("--format", choices=("beir", "markdown", "jsonl"), help="source format (default: detect)")
    parser.add_argument(
        "--include",
        action="append",
        metavar="GLOB",
        help="read only files matching GLOB (relative to PATH; repeatable; replaces [ingest] include)",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        metavar="GLOB",
        help="never read files matching GLOB (repeatable; beats --include; replaces [ingest] exclude)",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--tenant", default="default", help="whose stores to write (default: default, the home)")
    parser.set_defaults(func=_run)


def _write_failure(exc: BaseException) -> sqlite3.Error | OSError | None:
    """The store-write error inside ``exc`` (itself, its cause, or a leaf of an exception group), if any."""
    seen: list[BaseException] = [exc]
    while seen:
        cur = seen.pop()
        if isinstance(cur, sqlite3.Error | OSError):
            return cur
        if isinstance(cur, BaseExceptionGroup):
            seen.extend(cur.exceptions)
        if cur.__cause__ is not None:
            seen.append(cur.__cause__)
    return None


def _run(args: argparse.Namespace) -> int:
    try:
        return _ingest_cli(args)
    except BrokenPipeError:  # the reader of the output went away: the CLI's one line (exit 141), not a store failure
        raise
    except Exception as exc:  # the CLI edge: a store that cannot be written is one clear line, exit 1
        failure = _write_failure(exc)
        if failure is None:
            raise
        full = getattr(failure, "errno", None) == errno.ENOSPC or _looks_full(str(failure))
        hint = " (the disk is full: free space and run again; the next run repairs the stores)" if full else ""
        print(f"fabric: error: ingest could not write its stores: {type(failure).__name__}: {failure}{hint}",
              file=sys.stderr)  # fmt: skip
        return 1


def _ingest_cli(args: argparse.Namespace) -> int:
    from fabric.cli.progress import RichProgress
    from fabric.cli.search import home_and_tenant, load_cli_settings
    from fabric.core.errors import IngestError
    from fabric.ingest.loaders import detect_format
    from fabric.ingest.run import run_ingest

    path = Path(args.path)
    if not path.exists():
        raise IngestError(f"path: {path} does not exist")
    fmt = args.format or detect_format(path)

    settings, tenant = home_and_tenant(load_cli_settings(args), args.tenant)
    allow = {"tenant": tenant, "include": args.include, "exclude": args.exclude}
    if args.json:
        report = asyncio.run(run_ingest(settings, path, fmt, **allow))
        print(json.dumps(report.to_dict(), indent=2, sort_keys=True))
        return _verdict(report)
    progress = RichProgress()
    with progress.bar:
        report = asyncio.run(run_ingest(settings, path, fmt, cast("Progress", progress), **allow))
    where = str(settings.home) if tenant == "default" else f"{settings.home} (tenant {tenant})"
    _print_summary(report, where)
    return _verdict(report)


def _verdict(report: IngestReport) -> int:
    """Exit code of a finished run: 2 when the source held nothing to ingest, 1 (with one stderr line per failed
    store) when a store failed, else 0."""
    d = report.to_dict()
    if not d["docs"]:
        print(f"fabric: error: nothing to ingest: {d['source']} holds no {d['format']} documents", file=sys.stderr)
        return 2
    for glob in (d["allowlist"] or {}).get("unmatched", []):
        print(f"fabric: warning: allowlist glob {glob!r} matched no file under {d['source']}", file=sys.stderr)
    if d["duplicates"]["count"]:
        shown = ", ".join(d["duplicates"]["ids"][:5]) + (", ..." if len(d["duplicates"]["ids"]) > 5 else "")
        print(f"fabric: warning: {d['duplicates']['count']} entries repeat an earlier id (the last one wins): "
              f"{shown}", file=sys.stderr)  # fmt: skip
    failed = report.failed_stores
    if not failed:
        return 0
    for store, error in failed.items():
        hint = " (the disk is full: free space and run again)" if _looks_full(error) else ""
        print(f"fabric: error: ingest could not write its stores: {store}: {error.removeprefix('error: ')}{hint}",
              file=sys.stderr)  # fmt: skip
    print(f"fabric: error: {report.pending} chunk(s) pending in the ledger; run the same ingest again to repair "
          "them", file=sys.stderr)  # fmt: skip
    return 1


def _looks_full(message: str) -> bool:
    return "full" in message.lower() or "No space left" in message


def _print_summary(report: IngestReport, where: str) -> None:
    d = report.to_dict()
    print(f"ingested {d['source']} ({d['format']}) into {where}")
    print(
        f"  docs {d['docs']}  chunks {d['chunks']}  created {d['created']}  updated {d['updated']}  "
        f"repaired {d['repaired']}  unchanged {d['unchanged']}  deleted {d['deleted']}"
    )
    print(f"  embeddings: {d['embeddings']} ({d['embedded']} embedded)")
    for line in _selection_lines(d):
        print(f"  {line}")
    print("  stores: " + ", ".join(f"{k}={v}" for k, v in d["stores"].items()))
    stages = ("load", "chunk", "embed", "write")
    print("  seconds: " + "  ".join(f"{k} {d['seconds'].get(k, 0):.2f}" for k in stages))
    print("  docs/s:  " + "  ".join(f"{k} {d['docs_per_s'].get(k) or 0:.0f}" for k in stages))


def _selection_lines(d: dict[str, Any]) -> list[str]:
    """The summary's allowlist and trust lines (what narrowed the folder, who decided each file's trust)."""
    lines = []
    allow = d.get("allowlist")
    if allow is not None:
        by = allow["set_by"]
        shown = [f"include {', '.join(allow['include']) or 'everything'} ({by['include']})"]
        shown += [f"exclude {', '.join(allow['exclude']) or 'nothing'} ({by['exclude']})"]
        lines.append(f"allowlist: {'; '.join(shown)}: {allow['admitted']} admitted, {allow['excluded']} excluded")
    trust = d.get("trust")
    if trust is not None:
        rules = ", ".join(f"{r['rule']} {r['docs']}" for r in trust["rules"] if r["trust"] == "trusted")
        others = ", ".join(f"{r['rule']} {r['docs']}" for r in trust["rules"] if r["trust"] != "trusted")
        lines.append(f"trust: trusted {trust['trusted']} ({rules or 'no rule'})  untrusted {trust['untrusted']} "
                     f"({others or 'no rule'})")  # fmt: skip
    return lines
