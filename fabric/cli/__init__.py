"""The top floor: the ``fabric`` console script, which may import every floor below it.

The ``fabric`` console script: argument parsing, error reporting and exit codes.

Exit codes, each with one line on stderr, never a traceback: 0 success; 1 a gate or check failed; 2 bad input or
configuration (a text argument that is not valid UTF-8 included: ids, sources, queries, tenants; file names may hold
any bytes); 3 busy: the home is held by another process or the port is in use; 4 a file or folder cannot be
read; 130 interrupted (Ctrl-C); 141 the reader of the output went away (a closed pipe).

The global options (``--home``, ``--config``, ``--profile``, ``-v``) may stand before or after the subcommand.
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
    "eval_cite",
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
"""Subcommand modules of this package, in help order (module ``eval_cite`` is the subcommand ``eval-cite``): each
exposes ``register(subparsers)``, which sets ``func(args) -> int``, and imports its heavy dependencies inside ``run``
so that ``fabric --help`` stays fast."""


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every available subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="fabric",
        description="Federated retrieval: concurrent lanes under per-mode budgets, fused, deduplicated, cited.",
    )
    parser.add_argument("--version", action="version", version=f"fabric {__version__}")
    _global_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"fabric.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"fabric.cli.{name}":
                continue
            raise
        module.register(sub)
    _also_after_subcommands(parser)
    return parser


def _global_options(parser: argparse.ArgumentParser, default: object = None) -> None:
    parser.add_argument(
        "--config", default=default, help="a settings file (TOML) over the built-in defaults (see `fabric config show`)"
    )
    parser.add_argument("--profile", default=default, help="a built-in settings profile, e.g. 'compose'")
    parser.add_argument(
        "--home", default=default, help="store folder (default: $FABRIC_HOME, else the user data folder)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", default=default or False, help="log debug lines")


def _also_after_subcommands(parser: argparse.ArgumentParser) -> None:
    """Accept the global options after every subcommand too (``fabric search foo --home X``); a value given there
    wins over one given before the subcommand, and an absent one leaves it alone."""
    for action in parser._actions:  # argparse keeps its subparsers here
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                _global_options(child, default=argparse.SUPPRESS)
                _also_after_subcommands(child)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    undecodable = _undecodable_argument(parser, args)
    if undecodable is not None:  # surrogate-escaped bytes would reach SQLite (UnicodeEncodeError) or a log
        print(f"fabric: error: {undecodable}: not valid UTF-8 (the argument holds bytes that are not text)",
              file=sys.stderr)  # fmt: skip
        return 2
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
        return 3 if type(exc).__name__ in _BUSY else 2
    except KeyboardInterrupt:
        print("fabric: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of stdout went away (`| head`): nothing more to say, no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError) as exc:
        print(f"fabric: error: cannot read {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 4
    return code


_PATH_ARGUMENTS = frozenset({"path", "home", "config", "answer_file", "items", "token_file", "workers_dir", "options"})
"""Arguments naming files, whose names may be any bytes (Python hands them over surrogate-escaped, and gives the
same bytes back when it opens them); every other text argument must be valid Unicode."""


def _undecodable_argument(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str | None:
    """The option (``--entry-id``) or argument (``query``) whose text is not valid UTF-8, if any."""
    for dest, value in vars(args).items():
        if dest in _PATH_ARGUMENTS:
            continue
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str) and not text.isascii():
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError:
                    return _argument_name(parser, dest, args.command)
    return None


def _argument_name(parser: argparse.ArgumentParser, dest: str, command: str | None = None) -> str:
    """How the user wrote the argument stored in ``dest`` (of subcommand ``command``): its long option, else its
    name."""
    for action in parser._actions:  # argparse keeps its arguments (and subparsers) here
        if isinstance(action, argparse._SubParsersAction):
            children = [action.choices[command]] if command in action.choices else list(action.choices.values())
            for child in children:
                name = _argument_name(child, dest)
                if name != dest:
                    return name
        elif action.dest == dest and action.option_strings:
            return max(action.option_strings, key=len)
    return dest


_BUSY = frozenset({"HomeInUseError", "AddressInUseError"})
"""Errors that say another process holds what the command needs (exit 3)."""


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
