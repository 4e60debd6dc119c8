"""``fabric tune DATASET_DIR``: fit lane weights, RRF k and the fusion mode on a user's own judgements.

Runs the fused pass once through the real engine, keeping every lane's hits, then searches configurations
offline (:mod:`fabric.eval.tuning`) on half the queries and reports both halves. ``--write PATH`` stores the
choice as a user config file, read with ``fabric --config PATH`` or ``FABRIC_CONFIG=PATH``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from fabric.commands.eval import add_common_arguments

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add the ``tune`` subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser("tune", help="fit fusion weights/mode on a BEIR dataset")
    add_common_arguments(parser, default_split="train")
    parser.add_argument("--write", type=Path, metavar="TOML", help="write the chosen fusion settings here")
    parser.add_argument("--modes", nargs="+", help="fusion modes to search (default: rrf score_minmax score_dbsf)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=run, no_lane_passes=True)


def run(args: argparse.Namespace) -> int:
    """Fetch lane rankings, search, report, optionally write the TOML."""
    from fabric.commands.eval import execute
    from fabric.errors import QueryError
    from fabric.eval.runner import FUSED
    from fabric.eval.tuning import MODES, FusionChoice, to_toml, tune

    modes = tuple(args.modes or MODES)
    for mode in modes:
        if mode not in MODES:
            raise QueryError("modes", f"unknown fusion mode {mode!r}; valid: {', '.join(MODES)}")
    artifact, dataset, passes = execute(args, keep_lane_hits=True)
    cfg = artifact["config"]
    rankings = {qid: dict(r.lane_hits) for qid, r in passes[FUSED].runs.items()}
    default = FusionChoice(mode=cfg["fusion_mode"], k=cfg["rrf_k"], weights=cfg["weights"])
    report = tune(rankings, dataset.qrels, dataset.query_ids, default, modes=modes)
    out = {
        "dataset": artifact["dataset"],
        "engine_fused_ndcg_at_10": artifact["metrics"]["fused"]["ndcg_at_10"],
        **report.to_dict(),
    }
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(to_toml(report.best, report), encoding="utf-8")
        out["written"] = str(args.write)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    s = report.scores
    print(f"queries: {report.fit_queries} fit / {report.heldout_queries} held-out; {report.evaluated} configurations")
    print(f"engine fused nDCG@10 (configured fusion, boosts included): {out['engine_fused_ndcg_at_10']:.4f}")
    print(f"default {json.dumps(report.default.to_dict())}")
    print(f"  nDCG@10 fit {s['default']['fit']:.4f}  held-out {s['default']['heldout']:.4f}")
    print(f"best    {json.dumps(report.best.to_dict())}")
    print(f"  nDCG@10 fit {s['best']['fit']:.4f}  held-out {s['best']['heldout']:.4f}")
    for mode, u in report.untuned.items():
        print(f"  {mode:13} equal weights, k=60: fit {u['fit']:.4f}  held-out {u['heldout']:.4f}  all {u['all']:.4f}")
    for mode, m in report.by_mode.items():
        print(f"  best {mode:13} fit {m['fit']:.4f}  held-out {m['heldout']:.4f}  {json.dumps(m['config'])}")
    if args.write:
        print(f"wrote {args.write} (use: fabric --config {args.write} ...)")
    return 0
