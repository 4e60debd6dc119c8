"""Lane backend name → store writer class, lazily imported (like :mod:`lanes.registry` for lanes).

A writer is built from the same :class:`~lanes.base.LaneSpec` and :class:`~lanes.base.LaneResources` as its lane,
so both read one ``[lanes.<name>.options]`` table. Backends without a writer (web, feeds) are simply not written.
"""

from __future__ import annotations

import importlib
from typing import Any

from fabric.errors import ConfigError
from fabric.ingest.model import StoreWriter

__all__ = ["WRITERS", "build_writer", "build_writers", "has_writer"]

WRITERS: dict[str, str] = {
    "sqlite_fts": "lanes.keyword.sqlite_fts_store:SqliteFtsStore",
    "qdrant": "lanes.vector.qdrant_store:QdrantStore",
    "numpy_flat": "lanes.vector.flat_store:FlatVectorStore",
    "sqlite_graph": "lanes.graph.sqlite_store:SqliteGraphStore",
    "meilisearch": "lanes.keyword.meilisearch_store:MeilisearchStore",
    "arango": "lanes.graph.arango_store:ArangoGraphStore",
}
"""``backend`` value in ``config/lanes.toml`` → ``module:Class`` of its writer."""


def has_writer(backend: str) -> bool:
    """Whether ingestion writes to ``backend``."""
    return backend in WRITERS


def build_writer(spec: Any, resources: Any) -> StoreWriter:
    """Build the writer of ``spec.backend`` (a :class:`~lanes.base.LaneSpec`) with the shared ``resources``.

    Raises:
        ConfigError: the backend has no writer, or its module cannot be imported.
    """
    try:
        target = WRITERS[spec.backend]
    except KeyError:
        valid = ", ".join(sorted(WRITERS))
        raise ConfigError(f"backend {spec.backend!r} has no store writer; valid: {valid}") from None
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ConfigError(f"store writer {spec.backend!r} cannot be loaded: {exc}", key="backend") from None
    writer: StoreWriter = getattr(module, attr)(spec, resources)
    return writer


def build_writers(settings: Any, resources: Any) -> list[StoreWriter]:
    """Writers of every enabled lane of ``settings`` whose backend has one, in lane order."""
    from lanes.base import LaneSpec

    return [
        build_writer(LaneSpec(name=lc.name, kind=lc.kind, backend=lc.backend, options=lc.options), resources)
        for lc in settings.enabled_lanes()
        if has_writer(lc.backend)
    ]
