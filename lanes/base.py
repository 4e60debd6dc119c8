"""The one contract every lane adapter follows, and the resources the app injects into lanes.

A lane is a small async adapter. It does four things: translate a :class:`~fabric.core.models.LaneRequest`
into the backend's query, call the backend, translate the response into :class:`~fabric.core.models.Hit`
objects (best first, ``rank`` 1-based), and map the backend's exceptions onto :mod:`fabric.core.errors`.

A lane does **not** time itself, enforce budgets, retry, suspend providers, fuse, boost, dedup across
lanes, or read files and environment variables: :mod:`fabric.query.executor` owns all of that.

Attributes of every lane:

``name``
    Lane name from ``fabric/config/lanes.toml`` (``keyword``, ``vector``, ``web``, ...).
``kind``
    :class:`~fabric.core.models.LaneKind` of the lane.
``provider``
    Backend name reported in results and keyed by provider penalties (``sqlite_fts5``, ``qdrant``, ...).

Methods:

``async search(request) -> list[Hit]``
    Best first, at most ``request.top_k`` hits. Raises :class:`~fabric.core.errors.LaneError` subclasses.
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
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

from fabric.core.models import Embedder, Hit, LaneKind, LaneRequest

if TYPE_CHECKING:
    import aiohttp

    from fabric.core.chunks import StoreWriter
    from fabric.net.webcache import WebCache

__all__ = ["Backend", "BaseLane", "Lane", "LaneFactory", "LaneResources", "LaneSpec", "WriterFactory"]


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
    """Root folder of the tenant's embedded stores: ``FABRIC_HOME`` for the ``default`` tenant, else its
    sub-folder (:func:`fabric.core.tenants.tenant_home`)."""
    tenant: str = "default"
    """Whose data the lanes and writers read and write: server stores use a collection, index or database of
    this tenant (:func:`fabric.core.tenants.scoped_name`), embedded stores live under :attr:`home`."""
    http: aiohttp.ClientSession | None = None
    """The app's one shared aiohttp session for HTTP lanes."""
    embedder: Embedder | None = None
    """Embedder shared by the vector lane and ingestion; None when embeddings are unavailable."""
    web_cache: WebCache | None = None
    """The web response cache: the executor writes every successful web-kind answer to it, the ``web_cache``
    backend reads it; None disables both."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LaneSpec:
    """What the registry hands a lane factory: its name, kind, backend and backend options."""

    name: str
    kind: LaneKind
    backend: str
    options: Mapping[str, Any] = field(default_factory=dict)


LaneFactory = Callable[[LaneSpec, LaneResources], Lane]
"""Builds a lane from its spec and the shared resources (usually the lane class itself)."""

WriterFactory = Callable[[LaneSpec, LaneResources], "StoreWriter"]
"""Builds a backend's store writer from the same spec and resources as its lane (usually the writer class)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Backend:
    """What one backend declares about itself, once, in its own module (as ``BACKEND``).

    :mod:`lanes.registry` derives everything else from these declarations: the lane factories, the store
    writers ingestion uses, the environment variables the settings apply (:data:`fabric.settings.ENV_URLS`) and the
    backends whose hosts may be private (:data:`fabric.settings.SELF_HOSTED_BACKENDS`).
    """

    name: str
    """The ``backend`` value in ``fabric/config/lanes.toml``."""
    lane: LaneFactory
    """Builds the lane (the lane class)."""
    writer: WriterFactory | None = None
    """Builds the store writer ingestion fills; None for backends nothing is written to (web, feeds)."""
    options: Callable[[LaneSpec], object] | None = None
    """Parses and validates ``[lanes.<name>.options]`` (the one parser the lane and its writer share)."""
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Environment variable → option it sets on every lane of this backend (service URLs and secrets)."""
    secrets: frozenset[str] = frozenset()
    """Options that hold secrets: set only through :attr:`env`, never written in TOML."""
    self_hosted: bool = False
    """Runs next to the fabric (the compose stack): its hosts may resolve to private addresses."""


class BaseLane:
    """Optional convenience base: stores name/kind/provider, no-op ``open``/``aclose``, context manager."""

    provider: str = "base"
    year_filter_native: bool = False
    """Whether the backend applies a hard date range (``date_from``/``date_to``) as the temporal route's year filter
    before its top-k: an item passes only when a year it mentions or its publication year is in the range, undated
    items without one do not. Such a lane is asked for its usual ``top_k`` under that filter; any other is asked
    for ``[router] temporal_depth`` hits and the executor drops those outside the years
    (:mod:`fabric.query.year_filter`)."""

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

    def warming(self) -> bool:
        """Whether the lane still builds what makes it fast after :meth:`open` (it answers meanwhile, slower): the
        service is not ready until no lane is (``/readyz``). The default: never."""
        return False

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
