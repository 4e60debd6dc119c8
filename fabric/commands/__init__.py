"""CLI subcommands: one module each, exposing ``register(subparsers)`` which sets ``func(args) -> int``.

Modules import their heavy dependencies inside ``run`` so that ``fabric --help`` stays fast.
"""

__all__ = ["COMMANDS"]

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
)
"""Subcommand module names, in help order. A missing module is skipped (not yet built)."""
