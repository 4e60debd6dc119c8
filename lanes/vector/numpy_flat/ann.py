"""HNSW accelerator of the flat vector store (hnswlib): unfiltered searches of large stores without a full scan.

hnswlib is optional (the ``ann`` extra: it publishes no wheel, so pip compiles it). Without it every search is the
exact scan, logged once as ``ann_unavailable``; with it, it serves as below.

The flat store (:mod:`lanes.vector.numpy_flat.index`) stays the source of truth and answers every filtered
search exactly. Above :attr:`AnnConfig.min_rows` live rows, an HNSW graph over the index's rows ``[0, n)``
proposes the candidates of an unfiltered search; the index then scores them exactly against its float32 matrix,
together with every row appended since the graph was built (the *tail*), so scores, order and ties are those of
the exact search whenever the graph found the true neighbours (recall@100 ≥ 0.99 of exact search, measured in
docs/vector-store.md). Rows deleted since the build are dropped from the candidates (the graph is asked for more
to make up for them).

A graph is tied to one layout of the index's rows (its ids in row order): it is saved next to the store as
``<store>.hnsw`` with ``<store>.hnsw.json`` (rows covered, a digest of their ids, the build parameters), and a
reader that loads it checks the digest against its own rows. ``fabric ingest`` builds and saves it after writing
(:func:`build_for_store`); a serving index that finds it missing or stale (tail or deleted rows above
:attr:`AnnConfig.stale_fraction` of the graph) rebuilds it in a background thread on one core and searches
exactly meanwhile.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fabric.core.logs import get_logger
from lanes._options import LaneOptions
from lanes.base import LaneSpec

__all__ = [
    "AnnConfig",
    "AnnGraph",
    "ann_config",
    "available",
    "build_graph",
    "ids_digest",
    "load_graph",
    "save_graph",
    "saved_rows",
]

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class AnnConfig:
    """When and how the accelerator is built and searched (lane options ``ann``, ``ann_min_rows``, ``ann_ef``)."""

    enabled: bool = True
    min_rows: int = 20_000
    """Live rows from which a graph is built; below, the exact scan costs well under a millisecond."""
    ef_search: int = 300
    """Candidates the graph search keeps (at least the ``k`` asked): recall against cost."""
    m: int = 16
    ef_construction: int = 200
    stale_fraction: float = 0.1
    """Rebuild when the rows appended or deleted since the build exceed this share of the graph."""

    def fresh(self, graph_rows: int, rows: int, dead: int) -> bool:
        """Whether a graph over ``graph_rows`` rows still serves ``rows`` rows of which ``dead`` are deleted."""
        return (rows - graph_rows) + dead <= self.stale_fraction * graph_rows


_DEFAULT = AnnConfig()


def ann_config(spec: LaneSpec) -> AnnConfig:
    """The accelerator settings of a ``numpy_flat`` lane's options (``ann``, ``ann_min_rows``, ``ann_ef``); never
    enabled without hnswlib.

    Raises:
        ConfigError: an option of the wrong type, naming its key.
    """
    opts, default = LaneOptions(spec), _DEFAULT
    return AnnConfig(
        enabled=opts.flag("ann", default.enabled) and available(),
        min_rows=opts.integer("ann_min_rows", default.min_rows),
        ef_search=opts.integer("ann_ef", default.ef_search),
    )


@functools.cache
def available() -> bool:
    """Whether hnswlib can be imported (asked once per process; logged once when it cannot)."""
    if importlib.util.find_spec("hnswlib") is not None:
        return True
    log.info("ann_unavailable", reason="hnswlib is not installed (the 'ann' extra)", fallback="exact search")
    return False


def ids_digest(ids: Sequence[str]) -> str:
    """A digest of row ids in row order: a saved graph is valid for a layout with the same digest."""
    h = hashlib.blake2b(digest_size=16)
    for rid in ids:
        h.update(rid.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class AnnGraph:
    """An HNSW graph over rows ``[0, n)`` of one layout (``layout``: the owning index's layout counter)."""

    index: Any
    n: int
    digest: str
    layout: int

    def candidates(self, query: np.ndarray, k: int, alive: np.ndarray, n_rows: int) -> np.ndarray | None:
        """Row positions to score exactly for the ``k`` best live rows: the graph's neighbours still alive, plus the
        tail ``[self.n, n_rows)``; None when the graph cannot be asked for ``k`` (too few rows, or hnswlib found
        fewer)."""
        dead = self.n - int(np.count_nonzero(alive[: self.n]))
        fetch = k + (2 * k * dead) // max(self.n, 1) + (1 if dead else 0)
        if fetch > self.n:
            return None
        try:
            labels, _ = self.index.knn_query(query, k=fetch, num_threads=1)
        except RuntimeError:  # hnswlib found fewer than ``fetch`` neighbours: the exact search answers
            return None
        found: np.ndarray = labels[0].astype(np.int64)
        found = found[alive[found]]
        if n_rows > self.n:
            tail = np.arange(self.n, n_rows, dtype=np.int64)
            found = np.concatenate([found, tail[alive[self.n : n_rows]]])
        found.sort()
        return found


def build_graph(matrix: np.ndarray, ids: Sequence[str], layout: int, cfg: AnnConfig, threads: int) -> AnnGraph:
    """An HNSW graph (inner product over the unit rows of ``matrix``) whose labels are row positions."""
    import hnswlib

    n, dim = matrix.shape
    index = hnswlib.Index(space="ip", dim=dim)
    index.init_index(max_elements=max(n, 1), ef_construction=cfg.ef_construction, M=cfg.m)
    index.add_items(matrix, np.arange(n), num_threads=threads)
    index.set_ef(cfg.ef_search)
    return AnnGraph(index, n, ids_digest(ids[:n]), layout)


def _files(store: Path) -> tuple[Path, Path]:
    return store.with_name(store.name + ".hnsw"), store.with_name(store.name + ".hnsw.json")


def save_graph(graph: AnnGraph, store: Path, cfg: AnnConfig) -> None:
    """Write the graph and its description next to ``store`` (each file replaced atomically, description last)."""
    data, meta = _files(store)
    tmp = data.with_name(f"{data.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    graph.index.save_index(str(tmp))
    os.replace(tmp, data)
    desc = {"n": graph.n, "digest": graph.digest, "dim": graph.index.dim, **asdict(cfg)}
    tmp_meta = meta.with_name(f"{meta.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp_meta.write_text(json.dumps(desc), encoding="utf-8")
    os.replace(tmp_meta, meta)


def saved_rows(store: Path, ids: Sequence[str], dim: int, cfg: AnnConfig) -> int | None:
    """How many rows the saved graph of ``store`` covers, if its description matches a prefix of ``ids`` (same
    digest, dimension and build parameters); None when it is missing, stale or unreadable (logged, never raised).
    Reads the description only."""
    try:
        desc = json.loads(_files(store)[1].read_text(encoding="utf-8"))
        n = int(desc["n"])
        same = desc["m"] == cfg.m and desc["ef_construction"] == cfg.ef_construction and desc["dim"] == dim
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ann_graph_unreadable", store=str(store), error=str(exc))
        return None
    if not same or n > len(ids) or desc["digest"] != ids_digest(ids[:n]):
        return None
    return n


def load_graph(store: Path, ids: Sequence[str], dim: int, layout: int, cfg: AnnConfig) -> AnnGraph | None:
    """The saved graph of ``store`` if :func:`saved_rows` accepts it and its file holds those rows, else None
    (missing, stale or unreadable: logged, never raised)."""
    import hnswlib

    n = saved_rows(store, ids, dim, cfg)
    if n is None:
        return None
    try:
        index = hnswlib.Index(space="ip", dim=dim)
        index.load_index(str(_files(store)[0]), max_elements=n)
        if index.get_current_count() != n:
            return None
    except (OSError, RuntimeError) as exc:
        log.warning("ann_graph_unreadable", store=str(store), error=str(exc))
        return None
    index.set_ef(cfg.ef_search)
    return AnnGraph(index, n, ids_digest(ids[:n]), layout)
