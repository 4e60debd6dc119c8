"""``fabric eval DATASET_DIR``: retrieval quality of the real engine on a BEIR dataset, with a regression gate.

Ingests the corpus into a scratch home (reused when the corpus hash matches), runs every judged query fused and
through each lane alone, writes ``evals/artifacts/retrieval.json`` and ``retrieval.md`` next to it, and with
``--gate BASELINE`` exits 1 when a metric regressed past its threshold (see :mod:`fabric.eval.gate`).
``--write-baseline PATH`` stores this run as the new baseline (a deliberate act: commit it with the reason).

Exit codes: 0 done (gate passed), 1 gate failed, 2 bad dataset, lanes or configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fabric.core.errors import ConfigError
from fabric.core.models import FusionMode, Mode
from fabric.core.strategies import ROUTES
from fabric.eval.acceptance import acceptance_lines

__all__ = ["add_common_arguments", "execute", "load_cli_settings", "register", "run"]

DEFAULT_OUT = Path("evals/artifacts/retrieval.json")


def add_common_arguments(parser: argparse.ArgumentParser, *, default_split: str, many: bool = False) -> None:
    """Arguments ``eval`` and ``tune`` share: dataset, split, corpus, lanes, fusion, mode, limit.

    With ``many`` the dataset is repeatable and ``--split`` takes one split for all or one per dataset.
    """
    n = "+" if many else None
    folder_help = "BEIR folder (queries.jsonl, qrels/)" + (", repeatable" if many else "")
    parser.add_argument("dataset", type=Path, nargs=n, metavar="DATASET_DIR", help=folder_help)
    split_help = "qrels split, one for all or one per dataset" if many else "qrels split"
    parser.add_argument("--split", nargs=n, default=default_split, help=f"{split_help} (default {default_split})")
    parser.add_argument("--corpus", type=Path, help="corpus file or Markdown folder overriding the dataset's")
    parser.add_argument("--lanes", nargs="+", help="lanes to evaluate (default: enabled keyword/vector/graph lanes)")
    parser.add_argument("--fusion", choices=[m.value for m in FusionMode], help="fusion mode override")
    parser.add_argument("--mode", default=Mode.RESEARCH.value, choices=[m.value for m in Mode], help="query mode")
    parser.add_argument("--limit", type=int, help="only the first N judged queries")
    parser.add_argument("--top-k", type=int, default=100, help="items asked per query (default 100)")
    parser.add_argument("--concurrency", type=int, default=1, help="queries in flight (default 1: clean latency)")


def register(sub: Any) -> None:
    """Add the ``eval`` subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser("eval", help="measure retrieval quality on a BEIR dataset")
    add_common_arguments(parser, default_split="test")
    parser.add_argument(
        "--route",
        choices=ROUTES,
        help="route of the fused pass: auto | all | a strategy (default: [router] default_route, what a request "
        "that names none gets)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"artifact path (default {DEFAULT_OUT})")
    parser.add_argument("--gate", type=Path, metavar="BASELINE", help="fail (exit 1) on a regression vs this file")
    parser.add_argument("--write-baseline", type=Path, metavar="PATH", help="store this run as the baseline")
    parser.add_argument(
        "--compare-with",
        type=Path,
        metavar="ARTIFACT",
        help="compare this run query by query with another run's artifact (paired bootstrap interval, wins/losses)",
    )
    parser.add_argument("--no-lane-passes", action="store_true", help="skip the per-lane passes (fused only)")
    parser.add_argument(
        "--latency-passes",
        type=_positive_int,
        default=3,
        metavar="N",
        help="timed fused passes for the latency gate, best counts (default 3; the gate stops at the first "
        "passing one, --write-baseline runs all N)",
    )
    parser.add_argument("--json", action="store_true", help="print the artifact as JSON")
    parser.set_defaults(func=run)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def load_cli_settings(args: argparse.Namespace) -> Any:
    """Settings from the global ``--config`` / ``--profile`` flags (``--home`` is handled by the harness)."""
    from fabric.settings import load_settings

    config = getattr(args, "config", None)
    return load_settings(user_file=Path(config) if config else None, profile=getattr(args, "profile", None))


def _split_lanes(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [v for item in values for v in item.split(",") if v]


def _progress(json_mode: bool) -> Any:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True, quiet=json_mode and not sys.stderr.isatty())
    return Progress(
        TextColumn("{task.description:>10}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    )


def _load_baseline(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError("baseline file not found (create it with --write-baseline)", source=str(path)) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"invalid JSON: {exc.msg}", source=str(path)) from None
    if not isinstance(data, dict) or "fused" not in data.get("metrics", {}):
        raise ConfigError("not an eval artifact (no metrics.fused)", source=str(path), key="metrics.fused")
    return data


def _more_latency(args: argparse.Namespace, baseline: dict[str, Any] | None) -> Callable[[list[Any]], bool]:
    """Whether to time the fused pass once more, given the attempts so far (see fabric.eval.latency)."""
    from fabric.eval.gate import latency_within
    from fabric.eval.latency import best_normalised

    limit = getattr(args, "latency_passes", 1) if args.concurrency == 1 else 1
    writing = getattr(args, "write_baseline", None) is not None

    def more(attempts: list[Any]) -> bool:
        if len(attempts) >= limit:
            return False
        if writing:
            return True
        best = best_normalised(attempts)
        return baseline is not None and best is not None and not latency_within(best, baseline)

    return more


def _route(args: argparse.Namespace, settings: Any) -> str:
    """``--route``, else the configured default route for ``fabric eval`` (what a request naming none gets); the
    commands sharing the plan without the flag (``fabric tune``) keep the federation, whose lane hits they tune."""
    if not hasattr(args, "route"):
        return "all"
    return str(args.route or settings.router.default_route)


def _eval_plan(args: argparse.Namespace, settings: Any, keep_lane_hits: bool) -> Any:
    """The harness's plan from the command line: lanes (checked against the settings), fusion, mode, passes."""
    from fabric.eval import harness

    lanes = harness.check_lanes(settings, _split_lanes(args.lanes) or harness.default_lanes(settings))
    return harness.EvalPlan(
        lanes=tuple(lanes),
        route=_route(args, settings),
        federation=not getattr(args, "no_lane_passes", False),
        fusion=FusionMode.from_str(args.fusion) if args.fusion else None,
        mode=Mode.from_str(args.mode),
        top_k=args.top_k,
        concurrency=args.concurrency,
        lane_passes=not getattr(args, "no_lane_passes", False),
        keep_lane_hits=keep_lane_hits,
    )


def execute(
    args: argparse.Namespace, *, keep_lane_hits: bool = False, baseline: dict[str, Any] | None = None
) -> tuple[dict[str, Any], Any, Any]:
    """Load, ingest (or reuse), run the plan; returns (artifact, dataset, passes). Shared with ``tune``.

    With a ``baseline`` to gate against (or ``--write-baseline``), the fused pass is timed again while the latency
    check fails, up to ``--latency-passes`` times in all (see :mod:`fabric.eval.latency`).
    """

    from fabric.eval import harness
    from fabric.eval.dataset import load_dataset
    from fabric.eval.hints import hint_report, hinted_dataset, ranked
    from fabric.eval.report import build_artifact, git_revision
    from fabric.eval.runner import FUSED

    started = time.perf_counter()
    dataset = load_dataset(args.dataset, args.split, corpus=args.corpus).limited(args.limit)
    settings = load_cli_settings(args)
    plan = _eval_plan(args, settings, keep_lane_hits)
    corpus_hash = dataset.corpus_hash()
    explicit_home = Path(args.home) if getattr(args, "home", None) else None
    more_latency = _more_latency(args, baseline)
    hinted = hinted_dataset(dataset)

    run_settings, passes, clock, attempts, hint_pass, encoding = asyncio.run(
        _passes(args, settings, plan, dataset, hinted, more_latency, corpus_hash, explicit_home)
    )
    artifact = build_artifact(
        dataset,
        passes,
        config=harness.artifact_config(run_settings, plan),
        calibration_ms=clock.unit_ms,
        calibration_samples=len(clock.samples),
        latency_attempts=[a.to_dict() for a in attempts],
        corpus_hash=corpus_hash,
        wall_time_s=time.perf_counter() - started,
        revision=git_revision(),
    )
    if encoding is not None:  # the queries' encoding, inside every timed latency above
        fused_p50 = artifact["metrics"]["fused"].get("latency_p50_ms")
        share = round(encoding["p50_ms"] / fused_p50, 3) if fused_p50 else None
        artifact["encoding"] = {**encoding, "share_of_fused_p50": share}
    if hint_pass is not None:  # the docs-memory policy's hint-rate, for query sets whose queries carry a follow-up hint
        artifact["hints"] = hint_report(ranked(passes[FUSED]), ranked(hint_pass), dataset.qrels)
    return artifact, dataset, passes


async def _passes(
    args: argparse.Namespace,
    settings: Any,
    plan: Any,
    dataset: Any,
    hinted: Any,
    more_latency: Any,
    corpus_hash: str,
    explicit_home: Path | None,
) -> tuple[Any, Any, Any, list[Any], Any, dict[str, Any] | None]:
    """Build (or reuse) the home and run the plan's passes, the latency retries and the hinted pass."""
    import gc

    from fabric.eval import harness
    from fabric.eval.hints import run_hinted
    from fabric.eval.latency import attempt_from_pass
    from fabric.eval.runner import FUSED

    build = harness.ingest_settings(settings, plan.lanes)
    home = await harness.prepare_home(build, dataset, corpus_hash, harness.ingest_dataset, home=explicit_home)
    gc.collect()  # a fresh build leaves garbage behind; do not let its collection land in the timed passes
    run_settings = harness.eval_settings(settings, home=home, top_k=plan.top_k, lanes=plan.lanes)
    with _progress(getattr(args, "json", False)) as progress:

        def on_pass(name: str, total: int) -> Callable[[], None]:
            task = progress.add_task(name, total=total)
            return lambda: progress.advance(task)

        async with harness.open_engine(run_settings) as engine:
            passes, clock = await harness.run_plan(engine, dataset, plan, on_pass=on_pass)
            attempts = [attempt_from_pass(passes[FUSED], fallback_unit=clock.unit_ms)]
            while more_latency(attempts):
                name = f"fused #{len(attempts) + 1}"
                again = await harness.timed_fused_pass(
                    engine, dataset, plan, name=name, on_query=on_pass(name, len(dataset.queries))
                )
                attempts.append(attempt_from_pass(again))
            hint_pass = await run_hinted(engine, hinted, plan) if hinted is not None else None
            encoding = await harness.encoding_times(engine, [q.text for q in dataset.queries])
    return run_settings, passes, clock, attempts, hint_pass, encoding


def _print_summary(artifact: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{artifact['dataset']['name']} {artifact['split']} ({artifact['dataset']['queries']} queries)")
    keys = ("ndcg_at_10", "mrr_at_10", "recall_at_20", "recall_at_100", "hit_at_1", "hit_at_5", "latency_p95_ms")
    heads = ("nDCG@10", "MRR@10", "R@20", "R@100", "Hit@1", "Hit@5", "p95 ms")
    table.add_column("run")
    for head in heads:
        table.add_column(head, justify="right")
    rows = {f"fused ({artifact['config'].get('route', 'all')})": artifact["metrics"]["fused"]}
    if "federation" in artifact["metrics"]:
        rows["federation (all)"] = artifact["metrics"]["federation"]
    rows.update(artifact["metrics"]["lanes"])
    for name, m in rows.items():
        table.add_row(name, *(f"{m[k]:.4f}" if k != "latency_p95_ms" else f"{m[k]:.1f}" for k in keys))
    console = Console()
    console.print(table)
    enc = artifact.get("encoding")
    if enc:
        share = f", {enc['share_of_fused_p50']:.0%} of the fused p50" if enc.get("share_of_fused_p50") else ""
        times = f"p50 {enc['p50_ms']:.1f} ms, p95 {enc['p95_ms']:.1f} ms"
        console.print(f"query encoding (inside every latency above): {times}{share}")
    for warning in artifact.get("warnings", []):
        console.print(f"[yellow]warning[/yellow]: {warning}")
    for entry in (artifact.get("comparison") or {}).values():
        t = entry["ndcg_at_10"]
        console.print(
            f"fused vs {entry['against']}: nDCG@10 {t['mean_delta']:+.4f} [{t['ci95'][0]:+.4f}, {t['ci95'][1]:+.4f}],"
            f" {t['wins']} queries won, {t['losses']} lost"
        )
    gate = artifact.get("gate")
    if gate:
        verdict = "[green]PASS[/green]" if gate["passed"] else "[red]FAIL[/red]"
        console.print(f"gate: {verdict}")
        for problem in gate["problems"]:
            console.print(f"  problem: {problem}")
        for metric, c in gate["checks"].items():
            mark = "ok  " if c["passed"] else "FAIL"
            console.print(f"  {mark} {metric:15} {c['baseline']:.4f} → {c['current']:.4f} ({c['change']:+.2%})")
    for line in filter(None, acceptance_lines(artifact.get("acceptance"))):  # runs with stage-2 lanes
        console.print(line, markup=False)
    attempts = artifact.get("latency", {}).get("attempts") or []
    if len(attempts) > 1:
        figures = ", ".join(f"{a['p95_ms']:.1f} ms / {a['p95_normalised'] or 0:.2f} units" for a in attempts)
        console.print(f"latency: {len(attempts)} timed fused passes (p95 / normalised), best counts: {figures}")
    hints = artifact.get("hints")
    if hints:
        console.print(
            f"hint-rate {hints['hint_rate']:.3f} over {hints['queries']} hinted queries (Hit@1 {hints['hit_at_1']:.3f},"
            f" Hit@5 {hints['hit_at_5']:.3f}, Hit@5 with the hint {hints['hit_at_5_hinted']:.3f});"
            f" rescued: {', '.join(hints['rescued']) or 'none'}; missed with the hint: "
            f"{', '.join(hints['missed_with_hint']) or 'none'}"
        )
    console.print(f"wall time {artifact['wall_time_s']} s")


def _compare_with(artifact: dict[str, Any], other: dict[str, Any] | None, key: str, path: Path | None) -> None:
    """Add the query-by-query comparison with ``other`` (the baseline, or ``--compare-with``) when it has one."""
    from fabric.eval.compare import compare_artifacts

    if other is None or path is None:
        return
    route = (other.get("config") or {}).get("route", "all")
    found = compare_artifacts(artifact, other, against=f"{path.name} (route {route})")
    if found is not None:
        artifact["comparison"][key] = found


def run(args: argparse.Namespace) -> int:
    """Run the eval; returns 1 when the gate failed."""
    from fabric.eval.gate import evaluate_gate
    from fabric.eval.report import render_markdown

    baseline = _load_baseline(args.gate) if args.gate else None
    other = _load_baseline(args.compare_with) if getattr(args, "compare_with", None) else None
    artifact, _, _ = execute(args, baseline=baseline)
    if baseline is not None:
        artifact["baseline_revision"] = baseline.get("git_revision")
        artifact["gate"] = evaluate_gate(artifact, baseline).to_dict()
    _compare_with(artifact, baseline, "baseline", args.gate)
    _compare_with(artifact, other, "other", getattr(args, "compare_with", None))
    out: Path = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(artifact, indent=2) + "\n", encoding="utf-8")
    out.with_suffix(".md").write_text(render_markdown(artifact), encoding="utf-8")
    if args.write_baseline:
        args.write_baseline.parent.mkdir(parents=True, exist_ok=True)
        base = {**artifact, "gate": None, "baseline_revision": None}
        args.write_baseline.write_text(json.dumps(base, indent=2) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(artifact, indent=2))
    else:
        _print_summary(artifact)
    return 1 if artifact["gate"] and not artifact["gate"]["passed"] else 0
