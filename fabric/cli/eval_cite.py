"""``fabric eval-cite [SET]``: citation accuracy of ``fabric cite`` on a judged set (:mod:`fabric.eval.cite`).

Usage::

    fabric eval-cite                          # the shipped set over the demo corpus, in a scratch home
    fabric eval-cite my-set.jsonl --corpus notes/ --json
    fabric eval-cite --min-accuracy 0.8       # exit 1 when accuracy falls below 0.8

Ingests the corpus (``--corpus``, a Markdown folder; default: the shipped demo corpus) into a scratch home that is
removed afterwards (``--home`` keeps it there instead), cites every sentence of the set as ``fabric cite --query
QUERY --answer SENTENCE`` does (``--top-k``, ``--threshold``, ``--max-per-sentence``, ``--semantic`` as there) and
prints accuracy, the precision and recall of the "uncited" decisions, the coverage (share of sentences cited) and
the retrieval recall. Exit codes: 0 done, 1 accuracy below ``--min-accuracy``, 2 a bad set, corpus or option.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from fabric.core.errors import ConfigError, QueryError

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add the ``eval-cite`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser("eval-cite", help="measure citation accuracy on a judged set")
    p.add_argument("judged", nargs="?", type=Path, metavar="SET", help="judged set (JSONL; default: the shipped one)")
    p.add_argument("--corpus", type=Path, help="Markdown folder the set is judged on (default: the demo corpus)")
    p.add_argument("--top-k", dest="top_k", type=int, default=10, help="items searched per sentence (10)")
    p.add_argument("--threshold", type=float, default=0.7, help="minimum sentence-passage similarity (0.7)")
    p.add_argument("--max-per-sentence", dest="max_per_sentence", type=int, default=3, help="citations cap (3)")
    p.add_argument("--semantic", action="store_true", help="cosine of the engine's embeddings instead of lexical")
    p.add_argument("--min-accuracy", dest="min_accuracy", type=float, help="exit 1 below this accuracy")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def _check(args: argparse.Namespace) -> None:
    if not 0.0 < args.threshold <= 1.0:
        raise QueryError("threshold", "must be in (0, 1]")
    if args.max_per_sentence < 1:
        raise QueryError("max_per_sentence", "must be >= 1")
    if args.top_k < 1:
        raise QueryError("top_k", "must be >= 1")
    if args.min_accuracy is not None and not 0.0 <= args.min_accuracy <= 1.0:
        raise QueryError("min_accuracy", "must be in [0, 1]")
    if args.corpus is not None and not args.corpus.is_dir():
        raise ConfigError("expected a folder of Markdown notes", source=str(args.corpus))


def _report(args: argparse.Namespace, home: Path | None) -> dict[str, Any]:
    from fabric.cli.demo import shipped_corpus
    from fabric.cli.search import load_cli_settings
    from fabric.eval.cite import load_judged, run_cite_eval, shipped_set

    path = args.judged or shipped_set()
    judged = load_judged(path)
    settings = load_cli_settings(args)
    if home is not None:
        settings = dataclasses.replace(settings, home=home)
    corpus = args.corpus or shipped_corpus()
    report = asyncio.run(
        run_cite_eval(settings, judged, corpus, top_k=args.top_k, threshold=args.threshold,
                      max_per_sentence=args.max_per_sentence, semantic=args.semantic)
    )  # fmt: skip
    return {"set": str(path), "corpus": str(corpus), **report}


def _print(report: dict[str, Any]) -> None:
    m = report["metrics"]

    def fmt(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    print(f"{report['set']}: {m['sentences']} sentences ({m['supported']} supported, {m['unsupported']} not)")
    print(f"  accuracy          {fmt(m['accuracy'])}  (best citation is a supporting passage)")
    print(f"  uncited precision {fmt(m['uncited']['precision'])}  recall {fmt(m['uncited']['recall'])}")
    print(f"  coverage          {fmt(m['coverage'])}  (share of sentences cited)")
    print(f"  retrieval recall  {fmt(m['retrieval_recall'])}  (supporting passage among the items searched)")
    wrong = [r["id"] for r in report["rows"] if r["correct"] is False or (not r["supported"] and r["cited"])]
    if wrong:
        print(f"  wrong: {', '.join(wrong)}")


def run(args: argparse.Namespace) -> int:
    """Run the evaluation; returns the exit code."""
    _check(args)
    if getattr(args, "home", None):
        report = _report(args, None)
    else:
        with tempfile.TemporaryDirectory(prefix="fabric-eval-cite-") as scratch:
            report = _report(args, Path(scratch) / "home")
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        _print(report)
    accuracy = report["metrics"]["accuracy"]
    if args.min_accuracy is not None and (accuracy is None or accuracy < args.min_accuracy):
        print(f"eval-cite: accuracy {accuracy} is below --min-accuracy {args.min_accuracy}", file=sys.stderr)
        return 1
    return 0
