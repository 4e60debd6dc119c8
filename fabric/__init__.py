"""Retrieval fabric: an async multi-lane federation engine.

The front door (:mod:`fabric.api`)::

    import fabric

    async with fabric.open(home="./kb") as kb:
        answer = await kb.search("blue-green deploys", top_k=5)

``fabric.connect(...)`` is the same for code without an event loop. The names below are imported on first use, so
``import fabric`` stays cheap, does no I/O and writes nothing (the package's loggers are silent until the host
configures ``logging``). The floors of the package and what each may import: docs/architecture.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fabric.api import KnowledgeBase, SyncKnowledgeBase, connect, open
    from fabric.client import PageItem, SearchPage
    from fabric.core.errors import ConfigError, FabricError, IngestError, PartialResultError, QueryError
    from fabric.core.search_models import SearchRequest, SearchResult
    from fabric.core.vocabulary import Constraints, FusionMode, Mode
    from fabric.ingest.report import IngestReport
    from fabric.query.engine import Engine
    from fabric.settings import Settings, load_settings

__all__ = [
    "ConfigError",
    "Constraints",
    "Engine",
    "FabricError",
    "FusionMode",
    "IngestError",
    "IngestReport",
    "KnowledgeBase",
    "Mode",
    "PageItem",
    "PartialResultError",
    "QueryError",
    "SearchPage",
    "SearchRequest",
    "SearchResult",
    "Settings",
    "SyncKnowledgeBase",
    "__version__",
    "connect",
    "load_settings",
    "open",
]

__version__ = "0.2.0"

_HOMES = {
    "KnowledgeBase": "fabric.api",
    "SyncKnowledgeBase": "fabric.api",
    "connect": "fabric.api",
    "open": "fabric.api",
    "PageItem": "fabric.client",
    "SearchPage": "fabric.client",
    "ConfigError": "fabric.core.errors",
    "FabricError": "fabric.core.errors",
    "IngestError": "fabric.core.errors",
    "PartialResultError": "fabric.core.errors",
    "QueryError": "fabric.core.errors",
    "SearchRequest": "fabric.core.search_models",
    "SearchResult": "fabric.core.search_models",
    "Constraints": "fabric.core.vocabulary",
    "FusionMode": "fabric.core.vocabulary",
    "Mode": "fabric.core.vocabulary",
    "IngestReport": "fabric.ingest.report",
    "Engine": "fabric.query.engine",
    "Settings": "fabric.settings",
    "load_settings": "fabric.settings",
}


def __getattr__(name: str) -> Any:
    """The public names, imported from their floor on first use."""
    module = _HOMES.get(name)
    if module is None:
        raise AttributeError(f"module 'fabric' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
