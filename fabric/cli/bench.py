"""``fabric bench NAME [--json]``: run one benchmark of the repository's ``bench/`` folder and print its figures.

The benchmarks are developer tooling and are not part of the installed package: they are imported lazily, from
the repository root, when the command runs. From an installed wheel (no ``bench/`` folder) the command says so.
"""

from __future__ import annotations

import argparse
import importlib
import json
from typing import Any

from fabric.cli.checkout import add_checkout_to_path
from fabric.core.errors import FabricError

__all__ = ["BenchUnavailable", "load_bench", "register"]


class BenchUnavailable(FabricError):
    """``fabric bench`` run where the repository's ``bench/`` folder cannot be imported, or with an unknown name."""


def register(sub: Any) -> None:
    """Add the ``bench`` subcommand: ``NAME`` plus the benchmark's own options (parsed when it runs)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "bench",
        help="run a performance benchmark (from a repository checkout)",
        description="Run one benchmark of the repository's bench/ folder; options after NAME go to the benchmark.",
    )
    parser.add_argument("name", metavar="NAME", help="a benchmark listed in bench/__init__.py (budget, fusion, ...)")
    parser.add_argument("options", nargs=argparse.REMAINDER, help="the benchmark's options (NAME --help lists them)")
    parser.set_defaults(func=_run)


def load_bench(name: str) -> Any:
    """The module ``bench.<name>``; :class:`BenchUnavailable` without a ``bench/`` folder or for an unknown name."""
    add_checkout_to_path("bench")
    try:
        package = importlib.import_module("bench")
    except ModuleNotFoundError as exc:
        if exc.name != "bench":
            raise
        raise BenchUnavailable(
            "bench: the benchmarks are not installed with the package; "
            "run `fabric bench` from a repository checkout (the folder holding bench/)"
        ) from None
    names: tuple[str, ...] = getattr(package, "BENCHES", ())
    if name not in names:
        raise BenchUnavailable(f"bench: unknown benchmark {name!r} (available: {', '.join(names)})")
    return importlib.import_module(f"bench.{name}")


def _run(args: argparse.Namespace) -> int:
    module = load_bench(args.name)
    parser = argparse.ArgumentParser(
        prog=f"fabric bench {args.name}", description=(module.__doc__ or args.name).strip().splitlines()[0]
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    module.add_arguments(parser)
    bench_args = parser.parse_args(args.options)
    figures: dict[str, Any] = module.run(bench_args)
    if bench_args.json:
        print(json.dumps(figures, indent=2, sort_keys=True))
    else:
        for key, value in figures.items():
            print(f"{key:32} {value}")
    return 0
