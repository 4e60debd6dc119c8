"""``fabric slowcook``: the slow-cook job of the docs-memory policy in one command (:mod:`fabric.eval.slowcook`).

Refreshes the home incrementally from the fixed query set's corpus, runs the query set through the engine, and
writes one aggregate receipt (JSON) with the corpus changes, the metrics, the top failure cases and the verdict
against the previous receipt; prints a short summary (``--json``: the receipt). The receipt is kept at
``--receipt`` (default ``[slowcook] receipt`` or ``<home>/slowcook/receipt.json``); the one it replaces is kept
next to it as ``<name>.previous.json``.

Exit codes: 0 no regression (or the first run: the baseline); 1 a regression or a newly missed query, said in one
line on stderr; 2 bad input (query set, previous receipt, lanes, configuration), one clear line, no traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["default_receipt", "register", "resolve_queries", "shipped_queries"]


def register(sub: Any) -> None:
    """Add the ``slowcook`` subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "slowcook", help="refresh the index, run the fixed query set, write one receipt; exit 1 on a regression"
    )
    parser.add_argument(
        "--queries",
        type=Path,
        metavar="DATASET_DIR",
        help="the fixed query set (default: [slowcook] queries, else the shipped demo query set)",
    )
    parser.add_argument("--split", help="qrels split (default: [slowcook] split)")
    parser.add_argument(
        "--receipt",
        type=Path,
        metavar="PATH",
        help="receipt file, the previous one is read there (default: <home>/slowcook/receipt.json)",
    )
    parser.add_argument("--top", type=int, metavar="N", help="failure cases listed (default: [slowcook] top_failures)")
    parser.add_argument("--lanes", nargs="+", help="lanes to run (default: the enabled keyword/vector/graph lanes)")
    parser.add_argument("--json", action="store_true", help="print the receipt as JSON instead of the summary")
    parser.set_defaults(func=_run)


def resolve_queries(value: str | Path, *, from_config: bool) -> Path:
    """A query-set folder: as given (relative to the working directory), or, for an empty ``[slowcook] queries``,
    the query set shipped with the package over the demo corpus (``fabric/demo/queries``)."""
    if from_config and not str(value):
        return shipped_queries()
    return Path(value)


def shipped_queries() -> Path:
    """The query set shipped with the package (package data, as the demo corpus it judges)."""
    from importlib.resources import files

    return Path(str(files("fabric.demo").joinpath("queries")))


def default_receipt(settings: Any) -> Path:
    """``[slowcook] receipt`` when set, else ``<home>/slowcook/receipt.json``."""
    configured = settings.slowcook.receipt
    return Path(configured) if configured else settings.home / "slowcook" / "receipt.json"


def _settings(args: argparse.Namespace) -> Any:
    import dataclasses

    from fabric.cli.search import load_cli_settings
    from fabric.core.errors import ConfigError

    settings = load_cli_settings(args)
    if args.top is not None:
        if args.top < 1:
            raise ConfigError(f"--top must be at least 1, got {args.top}")
        settings = dataclasses.replace(settings, slowcook=dataclasses.replace(settings.slowcook, top_failures=args.top))
    return settings


def _write(path: Path, receipt: dict[str, Any]) -> None:
    """Keep the replaced receipt as ``<name>.previous.json``, then write the new one atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        os.replace(path, path.with_name(f"{path.stem}.previous.json"))
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(receipt, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _run(args: argparse.Namespace) -> int:
    from fabric.eval import harness
    from fabric.eval.dataset import load_dataset
    from fabric.eval.hints import hint_report, ranked
    from fabric.eval.report import git_revision
    from fabric.eval.slowcook import build_receipt, cook, load_previous

    started = time.perf_counter()
    settings = _settings(args)
    cfg = settings.slowcook
    folder = args.queries if args.queries is not None else resolve_queries(cfg.queries, from_config=True)
    dataset = load_dataset(folder, args.split or cfg.split)
    lanes = harness.check_lanes(settings, _split(args.lanes) or harness.default_lanes(settings))
    path: Path = args.receipt or default_receipt(settings)
    previous = load_previous(path)  # a bad previous receipt stops the run before anything is written
    report, fused, hinted = asyncio.run(cook(settings, dataset, lanes))
    hints = hint_report(ranked(fused), ranked(hinted), dataset.qrels) if hinted is not None else None
    receipt = build_receipt(
        settings=settings,
        dataset=dataset,
        lanes=lanes,
        ingest=report.to_dict(),
        fused=fused,
        hints=hints,
        previous=previous,
        extra={
            "git_revision": git_revision(),
            "wall_time_s": round(time.perf_counter() - started, 3),
            "receipt_path": str(path),
        },
    )
    _write(path, receipt)
    if args.json:
        print(json.dumps(receipt, indent=2, ensure_ascii=False))
    else:
        _print_summary(receipt)
    code: int = receipt["verdict"]["exit_code"]
    if code:
        print(receipt["verdict"]["line"], file=sys.stderr)
    return code


def _split(values: list[str] | None) -> list[str] | None:
    return [v for item in values for v in item.split(",") if v] if values else None


def _print_summary(receipt: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    c, m, qs = receipt["corpus"], receipt["metrics"], receipt["query_set"]
    console.print(
        f"slowcook {escape(qs['name'])} {qs['split']} ({qs['queries']} queries) over {escape(receipt['home'])}"
    )
    console.print(
        f"  corpus: added {c['added']}  updated {c['updated']}  unchanged {c['unchanged']}  "
        f"deleted {c['deleted']}  (embeddings: {escape(str(c['embeddings']))})"
    )
    allow = c.get("allowlist")
    if allow:
        shown = f"include {', '.join(allow['include']) or 'everything'}; "
        shown += f"exclude {', '.join(allow['exclude']) or 'nothing'}"
        console.print(f"  allowlist: {escape(shown)} ({allow['admitted']} admitted, {allow['excluded']} excluded)")
    checks = receipt["comparison"]["metrics"]
    line = []
    for key, name in (("ndcg_at_10", "nDCG@10"), ("mrr_at_10", "MRR@10"), ("hit_at_1", "Hit@1"), ("hit_at_5", "Hit@5")):
        delta = f" ({checks[key]['change']:+.4f})" if key in checks else ""
        line.append(f"{name} {m[key]:.4f}{delta}")
    console.print("  metrics: " + "  ".join(line))
    if receipt["hints"]:
        console.print(f"  hint-rate: {receipt['hints']['hint_rate']:.3f} over {receipt['hints']['queries']} queries")
    table = Table(title=f"top failure cases ({len(receipt['failures'])} of {receipt['failure_count']})")
    for head in ("query", "expected", "rank", "first", "score"):
        table.add_column(head, overflow="fold")
    for case in receipt["failures"]:
        first = case["first"] or {}
        score = f"{first['score']:.4f}" if first.get("score") is not None else "-"
        table.add_row(
            escape(f"{case['query_id']}: {case['query']}"),
            escape(", ".join(case["expected"][:1]) or "(none relevant)"),
            str(case["expected_rank"] or "-"),
            escape(first.get("doc_id", "(nothing)")),
            score,
        )
    if receipt["failures"]:
        console.print(table)
    verdict, comparison = receipt["verdict"], receipt["comparison"]
    if verdict["status"] == "regression":  # the one line itself goes to stderr
        found = [f"newly missed: {', '.join(comparison['newly_missed'])}"] if comparison["newly_missed"] else []
        found += [f"regressed: {', '.join(comparison['regressions'])}"] if comparison["regressions"] else []
        console.print(f"[red]REGRESSION[/red] ({escape('; '.join(found))})")
    else:
        colour = "green" if verdict["status"] == "pass" else "cyan"
        console.print(f"[{colour}]{verdict['status'].upper()}[/{colour}] {escape(verdict['line'])}")
    console.print(f"receipt: {escape(receipt['receipt_path'])}  ({receipt['wall_time_s']} s)")
