"""The one contract every lane adapter follows, and the resources the app injects into lanes.

A lane is a small async adapter. It does four things: translate a :class:`~fabric.models.LaneRequest`
into the backend's query, call the backend, translate the response into :class:`~fabric.models.Hit`
objects (best first, ``rank`` 1-based), and map the backend's exceptions onto :mod:`fabric.errors`.

A lane does **not** time itself, enforce budgets, retry, suspend providers, fuse, boost, dedup across
lanes, or read files and environment variables: :mod:`fabric.executor` owns all of that.

Attributes of every lane:

``name``
    Lane name from ``config/lanes.toml`` (``keyword``, ``vector``, ``web``, ...).
``kind``
    :class:`~fabric.models.LaneKind` of the lane.
``provider``
    Backend name reported in results and keyed by provider penalties (``sqlite_fts5``, ``qdrant``, ...).

Methods:

``async search(request) -> list[Hit]``
    Best first, at most ``request.top_k`` hits. Raises :class:`~fabric.errors.LaneError` subclasses.
``async open()``
    Optional: connect early (the executor calls it during warm-up). Must be idempotent.
``async aclose()``
    Release connections. Lanes are also async context managers.

No I/O happens at import time or in ``__init__``: constructors store typed config and injected resources.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

from fabric.models import Embedder, Hit, LaneKind, LaneRequest

if TYPE_CHECKING:
    import aiohttp

__all__ = ["BaseLane", "Lane", "LaneFactory", "LaneResources", "LaneSpec"]


@runtime_checkable
class Lane(Protocol):
    """The async lane contract (see the module docstring)."""

    name: str
    kind: LaneKind
    provider: str

    async def search(self, request: LaneRequest) -> list[Hit]:
        """Return at most ``request.top_k`` hits, best first."""
        ...

    async def open(self) -> None:
        """Connect early; idempotent."""
        ...

    async def aclose(self) -> None:
        """Release resources."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class LaneResources:
    """Shared resources the app owns and injects into lanes (never created per call)."""

    home: Path = Path(".fabric")
    """Root folder of the embedded stores (``FABRIC_HOME``)."""
    http: aiohttp.ClientSession | None = None
    """The app's one shared aiohttp session for HTTP lanes."""
    embedder: Embedder | None = None
    """Embedder shared by the vector lane and ingestion; None when embeddings are unavailable."""
    extras: Mapping[str, Any] = field(default_factory=dict)
    """Other shared objects keyed by name (e.g. an open store handle)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LaneSpec:
    """What the registry hands a lane factory: its name, kind, backend and backend options."""

    name: str
    kind: LaneKind
    backend: str
    options: Mapping[str, Any] = field(default_factory=dict)


LaneFactory = Callable[[LaneSpec, LaneResources], Lane]
"""Builds a lane from its spec and the shared resources (usually the lane class itself)."""


class BaseLane:
    """Optional convenience base: stores name/kind/provider, no-op ``open``/``aclose``, context manager."""

    provider: str = "base"

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        self.name = spec.name
        self.kind = spec.kind
        self.spec = spec
        self.resources = resources

    async def search(self, request: LaneRequest) -> list[Hit]:  # pragma: no cover - abstract
        """Subclasses implement the backend query."""
        raise NotImplementedError

    async def open(self) -> None:
        """Connect early; the default does nothing."""

    async def aclose(self) -> None:
        """Release resources; the default does nothing."""

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
