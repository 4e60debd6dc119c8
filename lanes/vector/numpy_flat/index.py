"""Exact cosine search over the flat vector store (:mod:`lanes.vector.numpy_flat.writer`), filters applied before top-k.

A :class:`FlatIndex` mirrors the store's vectors and filter columns in numpy arrays and follows its writes
incrementally (rows and deletions stamped after the generation it holds). A search takes an immutable
:class:`Snapshot`, so refreshes never disturb a search in flight: appended rows land beyond the snapshot's length,
a replaced or deleted row is switched off in a fresh copy of the ``alive`` mask, and grown buffers are new arrays.
When a quarter of the rows are dead the arrays are rebuilt from the store.

:meth:`FlatIndex.search` computes every allowed row's score (one matrix–vector product, no recall loss), takes
the top ``k`` with ``argpartition`` and orders them by score, ties by id. Given an
:class:`~lanes.vector.numpy_flat.ann.AnnConfig`,
an unfiltered search of a large store scores only the candidates of an HNSW graph (:mod:`lanes.vector.numpy_flat.ann`)
plus
the rows appended since it was built; the index loads the saved graph, or rebuilds it in the background when it is
missing or stale, and searches exactly until it is ready.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fabric.core.logs import get_logger
from fabric.embed.blas import blas_single_threaded
from lanes.vector.numpy_flat.ann import AnnConfig, AnnGraph, build_graph, load_graph, save_graph, saved_rows
from lanes.vector.numpy_flat.store import YEAR_WORDS, connect, year_range_bits

__all__ = ["FlatIndex", "Snapshot", "VectorFilter", "build_for_store"]

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class VectorFilter:
    """What a search keeps: years mentioned in a range, a trust code, domains (with their sub-domains)."""

    year_from: int | None = None
    year_to: int | None = None
    trust: int | None = None
    sites: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The rows a search sees; arrays are never written after the snapshot is taken (except beyond ``n``)."""

    n: int
    matrix: np.ndarray
    alive: np.ndarray
    years: np.ndarray
    trust: np.ndarray
    domain: np.ndarray
    ids: list[str]
    domains: list[str]
    graph: AnnGraph | None = None
    """The HNSW graph over a prefix of these rows, when one is ready (unfiltered searches use it)."""

    def mask(self, flt: VectorFilter) -> np.ndarray:
        """Rows that are alive and pass ``flt``."""
        keep = self.alive[: self.n].copy()
        if flt.year_from is not None or flt.year_to is not None:
            want = year_range_bits(flt.year_from, flt.year_to)
            keep &= (self.years[: self.n] & want).any(axis=1)
        if flt.trust is not None:
            keep &= self.trust[: self.n] == flt.trust
        if flt.sites:
            sites = [s.lower() for s in flt.sites]
            codes = [i for i, d in enumerate(self.domains) if any(d == s or d.endswith("." + s) for s in sites)]
            keep &= np.isin(self.domain[: self.n], np.asarray(codes, dtype=np.int32))
        return keep


class FlatIndex:
    """Reader of one flat store file; thread-safe (refreshes are serialised, searches are not)."""

    def __init__(self, path: Path, ann: AnnConfig | None = None) -> None:
        self.path = path
        self.ann = ann if ann is not None and ann.enabled else None
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._matrix = self._alive = self._years = self._trust = self._domain = np.zeros(0)
        self._layout = 0
        self._graph: AnnGraph | None = None
        self._loaded_layout = -1  # the layout whose saved graph was looked for
        self._building = False
        self._failed_layout = -1  # a build failed on this layout: not tried again until the rows move
        self._reset(0)

    def _reset(self, dim: int) -> None:
        self._layout += 1  # row positions change: a graph over the old rows no longer applies
        self._gen = 0
        self._dim = dim
        self._n = 0
        self._dead = 0
        self._ids: list[str] = []
        self._pos: dict[str, int] = {}
        self._domains: list[str] = []
        self._domain_codes: dict[str, int] = {}
        self._alloc(0)

    def _alloc(self, cap: int) -> None:
        def grow(old: np.ndarray | None, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
            new = np.zeros(shape, dtype=dtype)
            if old is not None and self._n:
                new[: self._n] = old[: self._n]
            return new

        first = cap == 0
        self._matrix = grow(None if first else self._matrix, (cap, self._dim), np.float32)
        self._alive = grow(None if first else self._alive, (cap,), np.bool_)
        self._years = grow(None if first else self._years, (cap, YEAR_WORDS), np.uint64)
        self._trust = grow(None if first else self._trust, (cap,), np.int8)
        self._domain = grow(None if first else self._domain, (cap,), np.int32)

    def _connection(self) -> sqlite3.Connection | None:
        if self._conn is None and self.path.is_file():
            self._conn = connect(self.path)
        return self._conn

    def snapshot(self) -> Snapshot:
        """Catch up with the store (only the changes since the last call) and return what a search sees."""
        with self._lock:
            conn = self._connection()
            if conn is not None:
                self._refresh(conn)
            if self.ann is not None:
                self._maintain_graph(self.ann)
            graph = self._graph if self._graph is not None and self._graph.layout == self._layout else None
            return Snapshot(
                self._n, self._matrix, self._alive.copy(), self._years, self._trust, self._domain,
                self._ids, self._domains, graph,
            )  # fmt: skip

    def _maintain_graph(self, cfg: AnnConfig) -> None:
        """Load the saved graph once per layout; rebuild in the background when it is missing or stale (lock held)."""
        if self._n - self._dead < cfg.min_rows:
            return
        if self._loaded_layout != self._layout:
            self._loaded_layout = self._layout
            self._graph = load_graph(self.path, self._ids, self._dim, self._layout, cfg)
        graph = self._graph
        fresh = graph is not None and graph.layout == self._layout and cfg.fresh(graph.n, self._n, self._dead)
        if fresh or self._building or self._failed_layout == self._layout:
            return
        self._building = True
        n, layout = self._n, self._layout
        matrix, ids = self._matrix[:n], self._ids[:n]  # rows below n are never written again
        threading.Thread(
            target=self._build, args=(matrix, ids, layout, cfg), name="fabric-ann-build", daemon=True
        ).start()

    def _build(self, matrix: np.ndarray, ids: list[str], layout: int, cfg: AnnConfig) -> None:
        """Build a graph over ``matrix`` on one core, publish it if the layout still holds, and save it."""
        try:
            graph = build_graph(matrix, ids, layout, cfg, threads=1)
            with self._lock:
                current = layout == self._layout
                if current:
                    self._graph = graph
            if current:
                save_graph(graph, self.path, cfg)
            log.info("ann_graph_built", store=str(self.path), rows=graph.n, published=current)
        except Exception as exc:  # the exact search goes on; a new layout tries again
            log.warning("ann_graph_build_failed", store=str(self.path), error=str(exc))
            with self._lock:
                self._failed_layout = layout
        finally:
            with self._lock:
                self._building = False

    def _refresh(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN")  # one read transaction: the generation and its rows agree
        try:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            gen, dim = int(meta.get("gen", 0)), int(meta.get("dim", 0))
            if gen == self._gen:
                return
            if dim != self._dim or self._dead > max(1024, self._n // 4):
                self._reset(dim)
            since = self._gen
            gone = [r[0] for r in conn.execute("SELECT id FROM tomb WHERE seq > ?", (since,))]
            rows = conn.execute("SELECT id, v, years, trust, domain FROM vec WHERE seq > ? ORDER BY seq", (since,))
            self._apply(gone, rows.fetchall())
            self._gen = gen
        finally:
            conn.execute("COMMIT")

    def _apply(self, gone: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> None:
        for rid in [*gone, *(r[0] for r in rows)]:
            pos = self._pos.pop(rid, None)
            if pos is not None:
                self._alive[pos] = False
                self._dead += 1
        if self._n + len(rows) > len(self._matrix):
            self._alloc(max(1024, 2 * (self._n + len(rows))))
        if not rows:
            return
        start, end = self._n, self._n + len(rows)
        ids, blobs, years, trust, domains = zip(*rows, strict=True)
        self._matrix[start:end] = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(rows), -1)
        self._years[start:end] = np.frombuffer(b"".join(years), dtype=np.uint64).reshape(len(rows), -1)
        self._trust[start:end] = trust
        self._domain[start:end] = [self._domain_codes.setdefault(d, len(self._domain_codes)) for d in domains]
        self._domains.extend(list(self._domain_codes)[len(self._domains) :])  # codes follow insertion order
        self._alive[start:end] = True
        self._ids.extend(ids)
        self._pos.update(zip(ids, range(start, end), strict=True))
        self._n = end

    def search(
        self, query: Sequence[float] | np.ndarray, k: int, flt: VectorFilter | None = None
    ) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, cosine)`` pairs among rows passing ``flt``, best first, ties by id."""
        snap = self.snapshot()
        if k <= 0 or snap.n == 0:
            return []
        q = np.asarray(query, dtype=np.float32)
        if q.shape != (snap.matrix.shape[1],):
            raise ValueError(f"query has dimension {q.shape[-1]}, the store {snap.matrix.shape[1]}")
        flt = flt or _UNFILTERED
        idx = None
        if snap.graph is not None and flt == _UNFILTERED:  # the graph's candidates, scored exactly below
            idx = snap.graph.candidates(q, k, snap.alive, snap.n)
        if idx is None:
            idx = np.flatnonzero(snap.mask(flt))
        if idx.size == 0:
            return []
        # a selective filter scores only the rows it keeps
        rows = snap.matrix[idx] if idx.size * 8 < snap.n else snap.matrix[: snap.n]
        scores = _scores(rows, q)
        if rows.shape[0] != idx.size:
            scores = scores[idx]
        if k < idx.size:
            top = np.argpartition(-scores, k - 1)[:k]
            cand = np.flatnonzero(scores >= scores[top].min())  # every row tied with the k-th stays in the race
        else:
            cand = np.arange(idx.size)
        ranked = sorted(cand.tolist(), key=lambda j: (-float(scores[j]), snap.ids[idx[j]]))[:k]
        return [(snap.ids[idx[j]], float(scores[j])) for j in ranked]

    def payloads(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Stored payloads of ``ids`` (ids deleted since the search are missing)."""
        with self._lock:
            conn = self._connection()
            if conn is None or not ids:
                return {}
            marks = ",".join("?" * len(ids))
            rows = conn.execute(f"SELECT id, payload FROM vec WHERE id IN ({marks})", list(ids)).fetchall()
        return {rid: json.loads(payload) for rid, payload in rows}

    def close(self) -> None:
        """Close the store connection."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


_UNFILTERED = VectorFilter()


def build_for_store(path: Path, cfg: AnnConfig, threads: int = 2) -> dict[str, Any]:
    """Build and save the HNSW graph of the store at ``path`` when it has at least ``cfg.min_rows`` live rows and
    its saved graph is missing or stale (``fabric ingest``, after writing): ``{"rows", "built"}``."""
    index = FlatIndex(path)
    try:
        snap = index.snapshot()
        live = int(np.count_nonzero(snap.alive[: snap.n]))
        if not cfg.enabled or live < cfg.min_rows:
            return {"rows": live, "built": False}
        saved = saved_rows(path, snap.ids, snap.matrix.shape[1], cfg)  # its description only
        if saved is not None and cfg.fresh(saved, snap.n, 0):  # a fresh reader holds no deleted rows
            return {"rows": live, "built": False}
        graph = build_graph(snap.matrix[: snap.n], snap.ids, 0, cfg, threads=threads)
        save_graph(graph, path, cfg)
        return {"rows": live, "built": True}
    finally:
        index.close()


def _scores(rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``rows · q`` on one thread: BLAS's gemv where :mod:`fabric.embed.blas` limited BLAS to one thread (the CLI's
    processes), else ``einsum`` (why: that module's docstring)."""
    scores: np.ndarray = rows @ q if blas_single_threaded() else np.einsum("ij,j->i", rows, q)
    return scores
