"""``fabric router label|train|eval``: oracle labels, the routing classifier, quality against cost per router.

- ``fabric router label DATASET_DIR``: runs every strategy (Dense, Temporal, Graph) on each judged query,
  scores each (nDCG@10), applies ``select_gold_label`` (δ from ``[router] delta``; the ablation over
  δ ∈ {0, 0.02, 0.05, 0.10} is printed), probes each query, and writes ``<home>/router/labels/<name>.jsonl``.
- ``fabric router train [LABELS ...]``: trains the late-fusion classifier on CPU from label files (default: every
  file under ``<home>/router/labels/``), reports on the dev split, saves ``<home>/<[router] model_file>``.
- ``fabric router eval DATASET_DIR [--json]``: all-lanes, Dense-only, heuristic, classifier (when trained) and
  oracle on each judged query: nDCG@10, lane calls per query, p50/p95 latency and their ratios to all-lanes.

The corpus is ingested into the eval harness's cached scratch home (``FABRIC_CACHE_DIR``), as ``fabric eval``
does. Exit codes: 0 done, 2 bad dataset, labels or configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from fabric.cli.checkout import needs_checkout
from fabric.core.models import Mode

__all__ = ["register", "run_eval", "run_label", "run_train"]


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", type=Path, metavar="DATASET_DIR", help="BEIR folder (queries.jsonl, qrels/)")
    parser.add_argument("--split", default="test", help="qrels split (default test)")
    parser.add_argument("--lanes", nargs="+", help="lanes of the federation (default: enabled offline lanes)")
    parser.add_argument("--mode", default=Mode.RESEARCH.value, choices=[m.value for m in Mode], help="query mode")
    parser.add_argument("--limit", type=int, help="only the first N judged queries")
    parser.add_argument("--top-k", type=int, default=10, help="items asked per query (default 10: nDCG@10)")


def register(sub: Any) -> None:
    """Add the ``router`` subcommand group."""
    parser: argparse.ArgumentParser = sub.add_parser("router", help="the query router of the router policy")
    group = parser.add_subparsers(dest="router_command", metavar="ACTION", required=True)
    label = group.add_parser("label", help="oracle labels: every strategy per query, select_gold_label")
    _common(label)
    label.add_argument(
        "--out", dest="labels_out", type=Path, help="label file (default <home>/router/labels/<dataset>.jsonl)"
    )
    label.add_argument("--json", action="store_true", help="print the summary as JSON")
    label.set_defaults(func=run_label)
    train = group.add_parser("train", help="train the late-fusion classifier from label files (CPU)")
    train.add_argument("labels", nargs="*", type=Path, help="label files (default <home>/router/labels/*.jsonl)")
    train.add_argument("--epochs", type=int, default=60, help="training epochs (default 60)")
    train.add_argument("--delta", type=float, help="re-label with this δ (default: the files' labels)")
    train.add_argument("--json", action="store_true", help="print the report as JSON")
    train.set_defaults(func=run_train)
    ev = group.add_parser("eval", help="quality against cost of all-lanes, Dense, heuristic, classifier, oracle")
    _common(ev)
    ev.add_argument("--out", type=Path, help="also write the report (JSON) here")
    ev.add_argument("--dev-only", action="store_true", help="only the dev-split queries (the classifier's test set)")
    ev.add_argument("--write-labels", action="store_true", help="also write the label file, as `label` does")
    ev.add_argument("--json", action="store_true", help="print the report as JSON")
    ev.set_defaults(func=run_eval)


def _cli_home(args: argparse.Namespace, settings: Any) -> Path:
    return Path(args.home) if getattr(args, "home", None) else Path(settings.home)


def _run_passes(
    args: argparse.Namespace, *, label: bool, probes_too: bool = False
) -> tuple[Any, Any, dict[str, Any], dict[str, Any]]:
    """Ingest (or reuse) the dataset's scratch home, open the engine, run the router passes (and probes).

    ``label``: only the three forced strategies (and the probes). ``probes_too``: every router pass and the probes.
    """
    from fabric.cli.eval import load_cli_settings
    from fabric.eval import harness
    from fabric.eval.dataset import load_dataset
    from tools.router.evaluation import PassSpec, default_passes, run_routes
    from tools.router.labels import collect_probes

    dataset = load_dataset(args.dataset, args.split).limited(args.limit)
    settings = load_cli_settings(args)
    if getattr(args, "dev_only", False):
        from fabric.query.router.classifier import dev_split
        from tools.router.labels import query_key

        dev = tuple(q for q in dataset.queries if dev_split(query_key(dataset.name, q.id)))
        dataset = dataclasses.replace(dataset, queries=dev)
    lanes = harness.check_lanes(settings, _split(args.lanes) or harness.default_lanes(settings))
    classifier = None if label else _load_classifier(_cli_home(args, settings), settings)
    specs = (
        [PassSpec(name=s, route=s) for s in ("dense", "temporal", "graph")]
        if label
        else default_passes(classifier is not None)
    )

    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        build = harness.ingest_settings(settings, lanes)
        home = await harness.prepare_home(build, dataset, dataset.corpus_hash(), harness.ingest_dataset)
        run_settings = harness.eval_settings(settings, home=home, top_k=args.top_k, lanes=lanes)
        async with harness.open_engine(run_settings) as engine:
            eng: Any = engine
            eng.router.classifier = classifier
            passes = await run_routes(eng, dataset, specs, lanes=lanes, mode=Mode.from_str(args.mode), top_k=args.top_k)
            probes = await collect_probes(eng, dataset) if label or probes_too else {}
        return passes, probes

    passes, probes = asyncio.run(go())
    return dataset, settings, passes, probes


def _split(values: list[str] | None) -> list[str] | None:
    return [v for item in values for v in item.split(",") if v] if values else None


def _load_classifier(home: Path, settings: Any) -> Any:
    from fabric.core.errors import ConfigError
    from fabric.query.router.classifier import RouterClassifier

    try:
        return RouterClassifier.load(home / settings.router.model_file)
    except ConfigError:
        return None


def _write_label_file(args: argparse.Namespace, dataset: Any, settings: Any, passes: Any, probes: Any) -> Path:
    from tools.router.evaluation import strategy_scores
    from tools.router.labels import label_rows, write_labels

    rows = label_rows(dataset, strategy_scores(dataset, passes), probes, delta=settings.router.delta)
    out: Path = getattr(args, "labels_out", None) or _cli_home(args, settings) / "router" / "labels"
    out = out / f"{dataset.name}.jsonl" if out.suffix != ".jsonl" else out
    write_labels(out, rows)
    return out


@needs_checkout("tools", "fabric router")
def run_label(args: argparse.Namespace) -> int:
    """Write the label file and print label counts and the δ ablation."""
    from fabric.query.router.oracle import ABLATION_DELTAS, ablation
    from tools.router.evaluation import strategy_scores

    started = time.perf_counter()
    dataset, settings, passes, probes = _run_passes(args, label=True)
    scores = strategy_scores(dataset, passes)
    out = _write_label_file(args, dataset, settings, passes, probes)
    summary = {
        "dataset": dataset.name,
        "queries": len(dataset.queries),
        "labelled": len(out.read_text(encoding="utf-8").splitlines()),
        "labels_file": str(out),
        "delta": settings.router.delta,
        "labels": ablation(scores.values(), (settings.router.delta,))[f"{settings.router.delta:.2f}"],
        "ablation": ablation(scores.values(), ABLATION_DELTAS),
        "mean_ndcg_at_10": {
            s: round(sum(v[s] for v in scores.values()) / max(1, len(scores)), 4)
            for s in ("dense", "temporal", "graph")
        },
        "wall_time_s": round(time.perf_counter() - started, 1),
    }
    _print(summary, args.json)
    return 0


@needs_checkout("tools", "fabric router")
def run_train(args: argparse.Namespace) -> int:
    """Train, report on the dev split, save the artifact under the home."""
    from fabric.cli.eval import load_cli_settings
    from fabric.core.errors import ConfigError
    from fabric.query.router.classifier import RouterClassifier, train_classifier
    from tools.router.labels import read_examples

    settings = load_cli_settings(args)
    home = _cli_home(args, settings)
    files = list(args.labels) or sorted((home / "router" / "labels").glob("*.jsonl"))
    if not files:
        raise ConfigError("no label files (run `fabric router label DATASET_DIR` first)", source=str(home / "router"))
    started = time.perf_counter()
    model, report = train_classifier(read_examples(files, delta=args.delta), epochs=args.epochs)
    path = home / settings.router.model_file
    RouterClassifier(model).save(
        path,
        report,
        encoder=f"{settings.embeddings.backend}:{settings.embeddings.model}",
        labels=[str(f) for f in files],
    )
    out = {"artifact": str(path), "files": [str(f) for f in files], **report.to_dict()}
    out["heuristic_thresholds"] = _threshold_report(files, settings)
    out["wall_time_s"] = round(time.perf_counter() - started, 1)
    _print(out, args.json)
    return 0


def _threshold_report(files: list[Path], settings: Any) -> dict[str, Any]:
    """The heuristic's thresholds chosen on the fit split of the label files (rows outside the dev split) and
    replayed on the held-out dev split, per dataset and overall, next to the configured pair."""
    from fabric.query.router.classifier import dev_split
    from tools.router.tuning import replay_heuristic, threshold_grid

    rows = [json.loads(line) for f in files for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    fit = [r for r in rows if not dev_split(str(r["key"]))]
    dev = [r for r in rows if dev_split(str(r["key"]))]
    cfg = settings.router
    grid = threshold_grid(fit, cfg)
    chosen = dataclasses.replace(cfg, skew_max=grid[0]["skew_max"], max_score_min=grid[0]["max_score_min"])
    held_out: dict[str, Any] = {}
    for name in sorted({str(r.get("dataset", "")) for r in dev}):
        part = [r for r in dev if r.get("dataset") == name]
        held_out[name] = {"configured": replay_heuristic(part, cfg), "chosen": replay_heuristic(part, chosen)}
    return {
        "fit_queries": len(fit),
        "dev_queries": len(dev),
        "configured": {"skew_max": cfg.skew_max, "max_score_min": cfg.max_score_min, **replay_heuristic(fit, cfg)},
        "best_on_fit": grid[:5],
        "held_out": {"all": {"configured": replay_heuristic(dev, cfg), "chosen": replay_heuristic(dev, chosen)},
                     **held_out},
    }  # fmt: skip


@needs_checkout("tools", "fabric router")
def run_eval(args: argparse.Namespace) -> int:
    """Print (and optionally write) the per-router report."""
    from fabric.query.router.classifier import dev_split
    from tools.router.evaluation import router_report
    from tools.router.labels import query_key

    if args.dev_only and args.write_labels:
        from fabric.core.errors import ConfigError

        raise ConfigError(
            "--write-labels with --dev-only would drop the training queries' labels", source="router eval"
        )
    started = time.perf_counter()
    dataset, settings, passes, probes = _run_passes(args, label=False, probes_too=args.write_labels)
    report: dict[str, Any] = {"dataset": dataset.name, "split": dataset.split, "queries": len(dataset.queries)}
    report.update(router_report(dataset, passes, delta=settings.router.delta))
    if "classifier" in passes:
        dev = tuple(q for q in dataset.queries if dev_split(query_key(dataset.name, q.id)))
        if dev:
            sub = dataclasses.replace(dataset, queries=dev)
            report["dev_split"] = {"queries": len(dev), **router_report(sub, passes, delta=settings.router.delta)}
    else:
        report["classifier"] = "not trained: run `fabric router label` and `fabric router train` (row omitted)"
    if args.write_labels:
        report["labels_file"] = str(_write_label_file(args, dataset, settings, passes, probes))
    report["config"] = {"top_k": args.top_k, "mode": args.mode, "router": dataclasses.asdict(settings.router)}
    report["wall_time_s"] = round(time.perf_counter() - started, 1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    _print(report, args.json)
    return 0


def _print(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(data, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    routers = data.get("routers")
    if routers:
        table = Table(title=f"router eval: {data['dataset']} ({data['queries']} queries)")
        heads = ("ndcg_at_10", "lanes_per_query", "p50_ms", "p95_ms", "ndcg_ratio_vs_all", "lanes_ratio_vs_all",
                 "p95_ratio_vs_all")  # fmt: skip
        table.add_column("router")
        for h in heads:
            table.add_column(h, justify="right")
        for name, row in routers.items():
            table.add_row(name, *(str(row[h]) for h in heads))
        console.print(table)
        data = {k: v for k, v in data.items() if k != "routers"}
    console.print_json(json.dumps(data))
