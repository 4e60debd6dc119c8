"""Ranking helpers of the SQLite graph lane: the best-first order of scored chunks, filtered reads, provenance.

The lane scores every chunk its reached entities mention (thousands at 50K passages) but returns ``top_k``:
:func:`first_passing` sorts only the head of the ranking (every chunk scoring at least the ``top_k``-th best
score, so ties stay in id order) and reads the whole ranking only when too few of the head pass the filters;
:func:`provenance` tells hops and entities for the returned chunks only.
"""

from __future__ import annotations

import heapq
import itertools
import operator
import sqlite3
from collections.abc import Sequence
from typing import Any

from lanes.sqlite_common import CHUNK_COLUMNS, placeholders

__all__ = ["best_first", "first_passing", "passing", "provenance", "slices"]


def passing(conn: sqlite3.Connection, order: list[str], where: str, params: list[Any], top_k: int) -> list[Any]:
    """The first ``top_k`` chunks of ``order`` that pass ``where`` (deep fill: keep reading until they do; the
    first read is ``top_k`` chunks, enough when nothing is filtered)."""
    rows: list[Any] = []
    for start, stop in slices(len(order), top_k):
        part = order[start:stop]
        sql = f"SELECT {CHUNK_COLUMNS} FROM chunks c WHERE c.id IN ({placeholders(part)}) AND {where}"
        found = {r[0]: r for r in conn.execute(sql, [*part, *params])}
        rows += [found[c] for c in part if c in found]
        if len(rows) >= top_k:
            break
    return rows[:top_k]


def slices(n: int, first: int, size: int = 500) -> list[tuple[int, int]]:
    """``[0, first)`` then ``size``-long slices up to ``n``."""
    bounds = [0, *range(max(1, first), n, size), n] if n else []
    return [(a, b) for a, b in itertools.pairwise(bounds) if b > a]


def provenance(ids: set[str], reached: dict[int, tuple[int, str, Sequence[str]]]) -> dict[str, Any]:
    """Each returned chunk's smallest hop count and the reached entities that led to it."""
    hops: dict[str, int] = {}
    via: dict[str, list[str]] = {}
    for hop, name, chunks in reached.values():
        for chunk_id in ids.intersection(chunks):
            hops[chunk_id] = min(hop, hops.get(chunk_id, hop))
            via.setdefault(chunk_id, []).append(name)
    return {"hops": hops, "via": via}


def best_first(scores: dict[str, float], k: int) -> list[str]:
    """The head of the chunks ranked by score (ties by id), at least ``k`` long when there are as many: every
    chunk scoring at least the k-th best score, so the head is exactly the full ranking's first chunks."""
    items: Any = scores.items()
    if k < len(scores):
        floor = heapq.nlargest(k, scores.values())[-1]
        items = [(c, s) for c, s in items if s >= floor]
    return [c for c, _ in sorted(sorted(items), key=operator.itemgetter(1), reverse=True)]


def first_passing(
    conn: sqlite3.Connection, scores: dict[str, float], where: str, params: list[Any], top_k: int
) -> list[Any]:
    """The best ``top_k`` chunks passing ``where``: read from the ranking's head, then (when too few of the head
    pass) from the whole ranking."""
    head = best_first(scores, top_k)
    rows = passing(conn, head, where, params, top_k)
    if len(rows) < top_k and len(head) < len(scores):
        rows = passing(conn, best_first(scores, len(scores)), where, params, top_k)
    return rows
