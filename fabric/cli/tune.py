"""``fabric tune DATASET_DIR [DATASET_DIR ...]``: fit lane weights, RRF k and the fusion mode on judgements.

Runs the fused pass once per dataset through the real engine, keeping every lane's hits, then searches
configurations offline (:mod:`tools.fusion_tuning`) on half of each dataset's queries and reports both halves.
With several datasets the objective is the worst (``--objective mean``: the mean) per-dataset nDCG@10 gain over
plain RRF k = 60, so a choice cannot buy one collection's gain with another's loss. ``--write PATH`` stores the
choice as a user config file, read with ``fabric --config PATH`` or ``FABRIC_CONFIG=PATH``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from fabric.cli.checkout import needs_checkout
from fabric.cli.eval import add_common_arguments

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add the ``tune`` subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser("tune", help="fit fusion weights/mode on BEIR datasets")
    add_common_arguments(parser, default_split="train", many=True)
    parser.add_argument("--write", type=Path, metavar="TOML", help="write the chosen fusion settings here")
    parser.add_argument(
        "--modes", nargs="+", help="fusion modes to search (default: rrf score_minmax score_dbsf score_zscore)"
    )
    parser.add_argument(
        "--objective", default="worst", help="combine per-dataset gains over plain RRF: worst (default) or mean"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=run, no_lane_passes=True)


def _runs(args: argparse.Namespace) -> list[argparse.Namespace]:
    """One eval namespace per dataset, each with its own split."""
    from fabric.core.errors import QueryError

    folders: list[Path] = list(args.dataset)
    splits = [args.split] if isinstance(args.split, str) else list(args.split)
    if len(splits) == 1:
        splits *= len(folders)
    if len(splits) != len(folders):
        raise QueryError("split", f"give one split for all datasets or one per dataset ({len(folders)})")
    pairs = zip(folders, splits, strict=True)
    return [argparse.Namespace(**{**vars(args), "dataset": d, "split": s}) for d, s in pairs]


@needs_checkout("tools", "fabric tune")
def run(args: argparse.Namespace) -> int:
    """Fetch lane rankings per dataset, search, report, optionally write the TOML."""
    from fabric.cli.eval import execute
    from fabric.core.errors import QueryError
    from fabric.eval.runner import FUSED
    from tools.fusion_tuning import MODES, OBJECTIVES, FusionChoice, TuneSet, to_toml, tune

    modes = tuple(args.modes or MODES)
    for mode in modes:
        if mode not in MODES:
            raise QueryError("modes", f"unknown fusion mode {mode!r}; valid: {', '.join(MODES)}")
    if args.objective not in OBJECTIVES:
        raise QueryError("objective", f"unknown objective {args.objective!r}; valid: {', '.join(OBJECTIVES)}")
    sets, engine_scores, cfg = [], {}, {}
    for one in _runs(args):
        artifact, dataset, passes = execute(one, keep_lane_hits=True)
        cfg = artifact["config"]
        name = dataset.name if dataset.name not in engine_scores else f"{dataset.name}/{dataset.split}"
        runs = passes[FUSED].runs
        rankings = {qid: dict(r.lane_hits) for qid, r in runs.items()}
        factors = {qid: dict(r.lane_confidence) for qid, r in runs.items()}  # the engine's lane confidence
        sets.append(
            TuneSet(name=name, rankings=rankings, qrels=dataset.qrels, query_ids=dataset.query_ids, factors=factors)
        )
        engine_scores[name] = artifact["metrics"]["fused"]["ndcg_at_10"]
    mnz = bool(cfg.get("combmnz"))
    default = FusionChoice(mode=cfg["fusion_mode"], k=cfg["rrf_k"], weights=cfg["weights"], combmnz=mnz)
    report = tune(sets, default, modes=modes, objective=args.objective)
    out = {"engine_fused_ndcg_at_10": engine_scores, **report.to_dict()}
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(to_toml(report.best, report), encoding="utf-8")
        out["written"] = str(args.write)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        _print(report, engine_scores, args.write)
    return 0


def _print(report: Any, engine_scores: dict[str, float], written: Path | None) -> None:
    print(f"{report.evaluated} configurations; objective: {report.objective} gain over plain RRF k=60 (fit halves)")
    print(f"default {json.dumps(report.default.to_dict())}")
    print(f"best    {json.dumps(report.best.to_dict())}")
    for name, per in report.scores.items():
        fit, held = report.fit_queries[name], report.heldout_queries[name]
        print(f"{name}: {fit} fit / {held} held-out queries; engine fused nDCG@10 {engine_scores[name]:.4f}")
        for label in ("reference", "default", "best"):
            s = per[label]
            print(f"  {label:9} fit {s['fit']:.4f}  held-out {s['heldout']:.4f}  all {s['all']:.4f}")
    for mode, m in report.by_mode.items():
        figures = "  ".join(f"{n} {m[n]['heldout']:.4f}" for n in report.scores)
        print(f"  best {mode:13} held-out: {figures}  {json.dumps(m['config'])}")
    if written:
        print(f"wrote {written} (use: fabric --config {written} ...)")
