"""``fabric [--home DIR] demo [--json]``: ingest the shipped notes into the home and run a few queries.

The corpus (``fabric/demo/corpus``: design notes about this engine, decisions with dates, commit SHAs and error
codes, roadmaps, a captain's log) is package data, so the demo works on a fresh machine: the embedded stores
need no servers and MiniLM loads offline. Each query prints its top items with the lanes that found them and
the score breakdown (RRF, lexical, semantic, graph), then the per-lane status; it runs every lane (route ``all``,
the federation) to show each lane's part, where a search defaults to the configured route. The home (the user data
folder unless ``--home`` or ``FABRIC_HOME`` says otherwise) is kept, and the demo ends with the next command to try: a
``fabric search`` over the same home. Running it again is cheap (ingestion skips unchanged notes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass

__all__ = ["DEMO_QUERIES", "register", "run_demo", "shipped_corpus"]

DEMO_QUERIES = (
    "QD-LOCK-01 second process cannot open the qdrant folder",
    "what happens to search when the embedding model is down",
    "Reciprocal Rank Fusion",
    "commit a41d7e0 FTS5 syntax error",
    "roadmap for learned routing in 2027",
)
"""Queries that exercise identifiers (keyword), paraphrase (vector), entities (graph) and years."""


def register(sub: Any) -> None:
    """Add the ``demo`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "demo", help="ingest the shipped notes into the home and run sample queries"
    )
    p.add_argument("--json", action="store_true", help="print the ingest summary and results as JSON")
    p.set_defaults(func=_run)


def shipped_corpus() -> Path:
    """The demo notes shipped with the package, where they are installed: the same source, with the same ids
    (``corpus:<path>``), as the shipped query set's corpus, so ``fabric slowcook`` over the demo's home finds them
    unchanged instead of ingesting them again under other ids."""
    return Path(str(resources.files("fabric.demo").joinpath("corpus")))


async def run_demo(settings: Any, queries: tuple[str, ...] = DEMO_QUERIES, progress: Any = None) -> dict[str, Any]:
    """Ingest the demo corpus into ``settings.home`` and run ``queries`` through the engine."""
    from fabric.core.models import SearchRequest
    from fabric.ingest.run import run_ingest
    from fabric.query.engine import Engine

    report = await run_ingest(settings, shipped_corpus(), "markdown", progress)
    results = []
    async with Engine(settings) as engine:
        for q in queries:
            results.append((await engine.search(SearchRequest(query=q, top_k=3, route="all"))).to_dict())
    return {
        "home": str(settings.home),
        "ingest": report.to_dict(),
        "results": results,
        "next": next_command(settings.home),
    }


def next_command(home: Path) -> str:
    """The search to try after the demo, over the demo's home (``--home`` only when it is not the default)."""
    query = shlex.quote(DEMO_QUERIES[2])
    from fabric.settings.paths import default_home

    if home == default_home():
        return f"fabric search {query}"
    return f"fabric --home {shlex.quote(str(home))} search {query}"


def _print(out: dict[str, Any]) -> None:
    ing = out["ingest"]
    print(f"ingested {ing['docs']} notes → {ing['chunks']} chunks; embeddings: {ing['embeddings']}")
    for res in out["results"]:
        print(f"\n» {res['query']}   (fusion {res.get('fusion_mode', '?')}; fused = its base score, rrf for reference)")
        for i, it in enumerate(res["items"], start=1):
            s = it["scores"]
            parts = [f"{k}={s[k]:.4f}" for k in ("fused", "rrf", "lexical", "semantic", "graph") if k in s]
            ranks = " ".join(f"{lane}#{rank}" for lane, rank in it["ranks"].items())
            print(f"  {i}. {it['title']}")
            print(f"     {it['id']}  total={it['score_total']:.4f}  {' '.join(parts)}  [{ranks}]")
        lanes = "  ".join(
            f"{name}:{lo['status']}({lo['hits']} hits, {lo['latency_ms']:.0f} ms)" for name, lo in res["lanes"].items()
        )
        print(f"  lanes  {lanes}")


def _run(args: argparse.Namespace) -> int:
    from fabric.cli.search import load_cli_settings

    settings = load_cli_settings(args)
    if args.json:
        out = asyncio.run(run_demo(settings))
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    from fabric.cli.progress import RichProgress

    progress = RichProgress()
    with progress.bar:
        out = asyncio.run(run_demo(settings, progress=progress))
    _print(out)
    print(f"\nthe demo's stores are in {settings.home}; next, try:\n  {out['next']}")
    return 0
