"""``fabric warm [--json]``: prepare what the first query needs, so that it is not the one that pays for it.

With the local MiniLM embedder this exports the model for the configured runtime (and the query model) into the
cache folder once, then encodes one document and one query; an image runs it at build time. With no embedder, or
a remote one, there is nothing to prepare beyond a call. Exit 2 when the embedder cannot be used.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

__all__ = ["register", "warm"]


def register(sub: Any) -> None:
    """Add the ``warm`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "warm", help="export and load the embedding model into the cache folder, so the first query is warm"
    )
    p.add_argument("--json", action="store_true", help="print what was prepared as JSON")
    p.set_defaults(func=_run)


def warm(settings: Any) -> dict[str, Any]:
    """Build the configured embedder and run one document and one query through it; what was done, timed.

    Raises:
        FabricError: the embedder cannot be used (a missing model package, an unwritable cache folder, ...).
    """
    from fabric.embed.embeddings import build_embedder

    start = time.perf_counter()
    embedder = build_embedder(settings.embeddings, settings.cache_dir)
    out: dict[str, Any] = {"cache_dir": str(settings.cache_dir), "embedder": None}
    if embedder is not None:
        embedder.embed(["warm-up document"])
        queries = getattr(embedder, "embed_queries", None)
        if queries is not None:
            queries(["warm-up query"])
        out.update(embedder=embedder.name, dim=embedder.dim)
    out["seconds"] = round(time.perf_counter() - start, 3)
    return out


def _run(args: argparse.Namespace) -> int:
    from fabric.cli.search import load_cli_settings

    out = warm(load_cli_settings(args))
    if args.json:
        print(json.dumps(out, indent=2, sort_keys=True))
    elif out["embedder"] is None:
        print("no embedder configured: nothing to prepare")
    else:
        print(f"{out['embedder']} ready in {out['cache_dir']} ({out['seconds']} s)")
    return 0
