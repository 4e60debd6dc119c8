"""The top floor: the ``fabric`` console script, which may import every floor below it.

The ``fabric`` console script: argument parsing, error reporting and exit codes.

Exit codes: 0 success; 1 a gate or check failed; 2 bad input or configuration (a clear message, never a
traceback); 130 interrupted; 141 the reader of the output went away (a closed pipe).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from fabric import __version__
from fabric.core.errors import FabricError
from fabric.core.logs import configure_logging
from fabric.embed.blas import limit_blas_threads

__all__ = ["COMMANDS", "build_parser", "main"]

COMMANDS = (
    "search",
    "ingest",
    "check",
    "eval",
    "slowcook",
    "bench",
    "demo",
    "serve",
    "mcp",
    "cite",
    "tune",
    "keys",
    "router",
    "delete",
    "audit",
    "config",
    "warm",
)
"""Subcommand modules of this package, in help order: each exposes ``register(subparsers)``, which sets
``func(args) -> int``, and imports its heavy dependencies inside ``run`` so that ``fabric --help`` stays fast."""


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every available subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="fabric",
        description="Federated retrieval: concurrent lanes under per-mode budgets, fused, deduplicated, cited.",
    )
    parser.add_argument("--version", action="version", version=f"fabric {__version__}")
    parser.add_argument("--config", help="a settings file (TOML) over the built-in defaults (see `fabric config show`)")
    parser.add_argument("--profile", help="config profile overlay, e.g. 'compose'")
    parser.add_argument("--home", help="store folder (default: $FABRIC_HOME, else the user data folder)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log to stderr at debug level")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"fabric.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"fabric.cli.{name}":
                continue
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.cli_argv = list(sys.argv[1:] if argv is None else argv)  # what a command that re-runs the CLI passes on
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    configure_logging(level="DEBUG" if args.verbose else "WARNING")
    limit_blas_threads()  # the process is the CLI's: numerical work runs one thread per call (fabric.embed.blas)
    try:
        code: int = args.func(args)
    except FabricError as exc:
        print(f"fabric: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fabric: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of stdout went away (`| head`): nothing more to say, no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
