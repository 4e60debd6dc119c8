"""The LanceDB vector store's layout, options, table schema, rows and error mapping (lane and writer share them).

One LanceDB database folder per tenant, ``<home>/vectors/lancedb`` (``options.path`` overrides it, scoped per tenant
by :func:`fabric.core.tenants.store_path`), holding one table per embedding model, ``<model slug>.lance``. A row is
the chunk id, its float32 vector, the filter columns (the years it mentions, its trust, its lower-cased domain) and
the payload a hit is made of (JSON, :func:`lanes.vector._payload.chunk_payload`), so the lane returns the same hit
for the same chunk as ``numpy_flat`` and ``qdrant``.

``lancedb`` and ``pyarrow`` are an optional extra (``pip install 'retrieval-fabric[lancedb]'``): they are imported
inside the functions that use them, and :meth:`LanceOptions.parse` (run by the lane's and the writer's constructor)
refuses the backend with a :class:`~fabric.core.errors.ConfigError` naming the extra when they are missing.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from fabric.core import tenants
from fabric.core.chunks import Chunk
from fabric.core.errors import ConfigError, LaneBadResponse, LaneError, LaneUnavailable
from fabric.core.models import Trust
from lanes._options import LaneOptions
from lanes.base import LaneResources, LaneSpec
from lanes.vector._payload import chunk_payload

__all__ = [
    "EXTRA",
    "INDEX_TYPES",
    "PROVIDER",
    "YEAR_MAX",
    "YEAR_MIN",
    "LanceOptions",
    "chunk_rows",
    "connect",
    "map_lance_error",
    "open_table",
    "quote",
    "schema",
    "table_dim",
    "table_name",
]

PROVIDER = "lancedb"
EXTRA = "pip install 'retrieval-fabric[lancedb]'"
"""How the optional packages are installed (named in the error when they are missing)."""
INDEX_TYPES = ("IVF_HNSW_SQ", "IVF_PQ")
"""ANN index types the writer builds (``options.index_type``)."""
YEAR_MIN = 1800
YEAR_MAX = 2111
"""A year filter matches the years in ``[YEAR_MIN, YEAR_MAX]`` only, as ``numpy_flat``'s year bitsets do (the year
extractor finds 1800–2100)."""


def _require() -> None:
    """Refuse the backend when its optional packages are not installed.

    Raises:
        ConfigError: ``lancedb`` or ``pyarrow`` is missing; the message names the extra to install.
    """
    missing = [m for m in ("lancedb", "pyarrow") if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(
            f"the lancedb backend needs the optional package(s) {', '.join(missing)}: {EXTRA}", key="backend"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LanceOptions:
    """``[lanes.<name>.options]`` of a LanceDB lane, read once for the lane and its writer."""

    path: str = ""
    """Database folder; default ``<home>/vectors/lancedb``."""
    trust: str | None = None
    """Keep only chunks of this trust (``trusted``, ...); none by default."""
    index_min_rows: int = 20_000
    """The writer's ``finish`` builds the ANN index once the table holds this many rows; below, search is exact."""
    index_type: str = "IVF_HNSW_SQ"
    """``IVF_HNSW_SQ`` or ``IVF_PQ``."""
    nprobes: int = 20
    """IVF partitions a search through the index visits."""
    ef: int = 300
    """HNSW search breadth (``IVF_HNSW_SQ``)."""
    refine_factor: int = 1
    """Candidates re-scored on the full vectors, as a multiple of ``top_k`` (1: the hits' scores are exact)."""

    @classmethod
    def parse(cls, spec: LaneSpec) -> LanceOptions:
        """Read and validate the options (a :class:`~fabric.core.errors.ConfigError` names a bad key).

        Raises:
            ConfigError: a bad option, or the optional packages are missing.
        """
        _require()
        opts = LaneOptions(spec)
        trust = opts.text("trust", "") or None
        valid = [t.value for t in Trust]
        if trust is not None and trust not in valid:
            raise ConfigError(
                f"unknown trust {trust!r}; valid: {', '.join(valid)}", key=f"lanes.{spec.name}.options.trust"
            )
        index_type = opts.text("index_type", "IVF_HNSW_SQ").upper()
        if index_type not in INDEX_TYPES:
            key = f"lanes.{spec.name}.options.index_type"
            raise ConfigError(f"unknown index type {index_type!r}; valid: {', '.join(INDEX_TYPES)}", key=key)
        return cls(
            path=opts.text("path", ""),
            trust=trust,
            index_min_rows=opts.integer("index_min_rows", 20_000),
            index_type=index_type,
            nprobes=opts.integer("nprobes", 20),
            ef=opts.integer("ef", 300),
            refine_factor=opts.integer("refine_factor", 1),
        )

    def folder(self, resources: LaneResources) -> Path:
        """The database folder of the resources' tenant."""
        return tenants.store_path(self.path, resources.home / "vectors" / "lancedb", resources.tenant)


def table_name(model: str) -> str:
    """The table of an embedding model: its lower-cased slug (``all_minilm_l6_v2``)."""
    return re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_") or "model"


def connect(folder: Path) -> Any:
    """A connection to the database folder that sees every committed write on each read (another process's too)."""
    import lancedb

    return lancedb.connect(str(folder), read_consistency_interval=timedelta(0))


def open_table(db: Any, folder: Path, name: str) -> Any | None:
    """The table ``name`` of the database in ``folder``, or None while nothing has been written to it."""
    if not (folder / f"{name}.lance").is_dir():
        return None
    return db.open_table(name)


def table_dim(table: Any) -> int:
    """The dimension of the table's vectors."""
    return int(table.schema.field("vector").type.list_size)


def schema(dim: int) -> Any:
    """The Arrow schema of a table of ``dim``-dimensional vectors."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dim)),
            pa.field("years", pa.list_(pa.int32())),
            pa.field("trust", pa.string()),
            pa.field("domain", pa.string()),
            pa.field("payload", pa.string()),
        ]
    )


def chunk_rows(chunks: Sequence[Chunk], dim: int) -> Any:
    """The Arrow table of ``chunks`` (each carries a ``dim``-dimensional vector; a repeated id keeps its last)."""
    import json

    import numpy as np
    import pyarrow as pa

    last = list({c.id: c for c in chunks}.values())
    flat = np.asarray([c.vector for c in last], dtype=np.float32).reshape(-1)
    columns = {
        "id": [c.id for c in last],
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(flat, type=pa.float32()), dim),
        "years": [sorted(set(c.years)) for c in last],
        "trust": [c.trust.value for c in last],
        "domain": [c.domain.lower() for c in last],
        "payload": [json.dumps(chunk_payload(c), separators=(",", ":")) for c in last],
    }
    return pa.table(columns, schema=schema(dim))


def quote(text: str) -> str:
    """``text`` as a SQL string literal of LanceDB's filters (a quote doubled; nothing else is special)."""
    return "'" + text.replace("'", "''") + "'"


def map_lance_error(exc: BaseException, lane: str = "") -> LaneError:
    """A LanceDB failure as a lane error: a bad argument is a bad response, anything else the store unavailable."""
    if isinstance(exc, LaneError):
        return exc
    if isinstance(exc, ValueError):
        return LaneBadResponse(f"lancedb refused the query: {exc}", lane=lane, provider=PROVIDER)
    return LaneUnavailable(f"lancedb store unavailable: {exc}", lane=lane, provider=PROVIDER)
