"""Backend name → lane class. Imports are lazy so that building one lane never imports another's SDK.

Adding a lane touches four files: its module, one line here, its ``config/lanes.toml`` entry, and its
test module.
"""

from __future__ import annotations

import importlib

from fabric.errors import ConfigError
from lanes.base import Lane, LaneFactory, LaneResources, LaneSpec

__all__ = ["BACKENDS", "build_lane", "resolve"]

BACKENDS: dict[str, str] = {
    "fake": "lanes.fake:FakeLane",
    "sqlite_fts": "lanes.keyword.sqlite_fts:SqliteFtsKeywordLane",
    "meilisearch": "lanes.keyword.meilisearch:MeilisearchKeywordLane",
    "qdrant": "lanes.vector.qdrant:QdrantVectorLane",
    "numpy_flat": "lanes.vector.flat:FlatVectorLane",
    "sqlite_graph": "lanes.graph.sqlite:SqliteGraphLane",
    "arango": "lanes.graph.arango:ArangoGraphLane",
    "searxng": "lanes.web.searxng:SearxngWebLane",
    "wikipedia": "lanes.web.wikipedia:WikipediaWebLane",
    "mdn": "lanes.web.mdn:MdnWebLane",
    "web_cache": "lanes.web.cache:CachedWebLane",
    "rss": "lanes.feeds.rss:RssNewsLane",
    "quotes": "lanes.feeds.quotes:QuotesMarketsLane",
}
"""``backend`` value in ``config/lanes.toml`` → ``module:Class``."""


def resolve(backend: str) -> LaneFactory:
    """Import and return the factory for ``backend``.

    Raises:
        ConfigError: unknown backend name.
    """
    try:
        target = BACKENDS[backend]
    except KeyError:
        valid = ", ".join(sorted(BACKENDS))
        raise ConfigError(f"unknown backend {backend!r}; valid: {valid}", key="backend") from None
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ConfigError(f"backend {backend!r} cannot be loaded: {exc}", key="backend") from None
    factory: LaneFactory = getattr(module, attr)
    return factory


def build_lane(spec: LaneSpec, resources: LaneResources) -> Lane:
    """Build the lane described by ``spec`` with the shared ``resources``."""
    return resolve(spec.backend)(spec, resources)
