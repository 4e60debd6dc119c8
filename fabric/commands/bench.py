"""``fabric bench NAME [--json]``: run one benchmark (:data:`fabric.bench.BENCHES`) and print its figures."""

from __future__ import annotations

import argparse
import importlib
import json
from typing import Any

from fabric.bench import BENCHES

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add the ``bench`` subcommand with one sub-subcommand per available benchmark."""
    parser: argparse.ArgumentParser = sub.add_parser("bench", help="run a performance benchmark")
    names = parser.add_subparsers(dest="bench", metavar="NAME", required=True)
    for name, module_name in [*((n, f"fabric.bench.{n}") for n in BENCHES), ("scale", "bench.scale")]:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name in (module_name, module_name.rpartition(".")[0]):
                continue
            raise
        p = names.add_parser(name, help=(module.__doc__ or name).strip().splitlines()[0])
        p.add_argument("--json", action="store_true", help="print the figures as JSON")
        module.add_arguments(p)
        p.set_defaults(func=_runner(module))


def _runner(module: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        figures: dict[str, Any] = module.run(args)
        if args.json:
            print(json.dumps(figures, indent=2, sort_keys=True))
        else:
            for key, value in figures.items():
                print(f"{key:32} {value}")
        return 0

    return run
