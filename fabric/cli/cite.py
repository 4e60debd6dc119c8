"""``fabric cite``: align an answer's sentences with retrieved passages (markers, bibliography, disagreements).

Usage::

    fabric cite --answer "TEXT" --query "QUERY" [--json]          # runs the engine for the passages
    fabric cite --answer-file answer.txt --items results.json       # passages from `fabric search --json`

The bibliography lists every source document of the items: ``[n]`` for the cited ones, ``[-]`` for the others
(:mod:`fabric.core.sources`); each disagreement names its kind, severity and topic (:mod:`fusion.disagree`).

``--items`` accepts the result JSON of ``fabric search --json`` (its ``items``; the ``text`` field is used when
present, else the ``snippet``) or a bare JSON list of such items. ``--semantic`` uses the configured embedder
(cosine of embeddings) instead of lexical containment when one is available. ``--threshold`` (0.7) and
``--max-per-sentence`` (3) follow the fusion policy. Bad input exits 2 with one line naming the field.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from fabric.core.errors import QueryError
from fabric.core.models import Hit
from fabric.query.result_items import hits_from_json

__all__ = ["hits_from_json", "register", "run"]


def register(sub: Any) -> None:
    """Add the ``cite`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser("cite", help="align an answer's sentences with cited passages")
    answer = p.add_mutually_exclusive_group(required=True)
    answer.add_argument("--answer", help="the answer text")
    answer.add_argument("--answer-file", dest="answer_file", help="file holding the answer text")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--query", help="run this query through the engine and cite its items")
    source.add_argument("--items", help="result JSON of `fabric search --json` (or a JSON list of items)")
    p.add_argument("--top-k", dest="top_k", type=int, default=10, help="items to cite from with --query")
    p.add_argument("--threshold", type=float, default=0.7, help="minimum sentence-passage similarity (0.7)")
    p.add_argument("--max-per-sentence", dest="max_per_sentence", type=int, default=3, help="citations cap (3)")
    p.add_argument("--semantic", action="store_true", help="use the configured embedder when available")
    p.add_argument("--json", action="store_true", help="print the citation JSON")
    p.set_defaults(func=run)


def _read_answer(args: argparse.Namespace) -> str:
    if args.answer is not None:
        text = str(args.answer)
    else:
        try:
            text = Path(args.answer_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise QueryError("answer_file", f"cannot read {args.answer_file}: {exc.strerror}") from None
    if not text.strip():
        raise QueryError("answer", "the answer is empty")
    return text


def _read_items(path: str) -> list[Hit]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise QueryError("items", f"cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise QueryError("items", f"{path} is not JSON: {exc.msg} at line {exc.lineno}") from None
    return hits_from_json(data)


async def _search_hits(args: argparse.Namespace) -> list[Hit]:
    from fabric.cli.search import load_cli_settings
    from fabric.query.engine import Engine
    from fabric.query.validation import parse_request

    settings = load_cli_settings(args)
    request = parse_request({"query": args.query, "top_k": args.top_k}, settings)
    async with Engine(settings) as engine:
        result = await engine.search(request)
    return [it.hit for it in result.items]


def _similarity(args: argparse.Namespace) -> Any:
    if not args.semantic:
        return None
    from fusion.citations import embedding_similarity

    try:
        from fabric.cli.search import load_cli_settings
        from fabric.embed.embeddings import build_embedder  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        print("cite: no embedder available; using lexical similarity", file=sys.stderr)
        return None
    settings = load_cli_settings(args)
    embedder = build_embedder(settings.embeddings, settings.cache_dir)
    if embedder is None:
        print("cite: no embedder configured; using lexical similarity", file=sys.stderr)
        return None
    return embedding_similarity(embedder)


def run(args: argparse.Namespace) -> int:
    """Read the answer and the items, align, print; returns the exit code."""
    from fusion.citations import align_citations

    if not 0.0 < args.threshold <= 1.0:
        raise QueryError("threshold", "must be in (0, 1]")
    if args.max_per_sentence < 1:
        raise QueryError("max_per_sentence", "must be >= 1")
    answer = _read_answer(args)
    hits = asyncio.run(_search_hits(args)) if args.query is not None else _read_items(args.items)
    result = align_citations(
        answer, hits, similarity=_similarity(args), threshold=args.threshold, max_per_sentence=args.max_per_sentence
    )
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
        return 0
    print(result.text)
    if result.bibliography:
        print()
        for source in result.bibliography:
            tag = f"[{source.marker}]" if source.marker is not None else "[-]"
            by = f" ({source.author})" if source.author else ""
            print(f"{tag} {source.title or source.id}{by} — {source.url or source.id}")
    for d in result.disagreements:
        print(
            f"! sentence {d.sentence + 1}: [{d.markers[0]}] and [{d.markers[1]}] disagree on {d.term!r} "
            f"({d.kind}, {d.severity}; topic: {d.topic}): {d.detail}"
        )
    return 0
