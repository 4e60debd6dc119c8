"""Lane backend → store writer, as each backend declares it (:class:`lanes.base.Backend`, read through
:mod:`lanes.registry`).

A writer is built from the same :class:`~lanes.base.LaneSpec` and :class:`~lanes.base.LaneResources` as its lane,
so both read one ``[lanes.<name>.options]`` table. Backends without a writer (web, feeds) are simply not written.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from fabric.core.chunks import StoreWriter
from fabric.core.errors import ConfigError
from fabric.settings import Settings
from lanes.base import LaneResources, LaneSpec, WriterFactory
from lanes.registry import descriptor, writers

__all__ = ["WRITERS", "build_writer", "build_writers", "has_writer"]


class _Writers(Mapping[str, WriterFactory]):
    """Backend name → writer factory, derived from the backend declarations on first use."""

    def _table(self) -> dict[str, WriterFactory]:
        return {name: d.writer for name, d in writers().items() if d.writer is not None}

    def __getitem__(self, key: str) -> WriterFactory:
        return self._table()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


WRITERS: Mapping[str, WriterFactory] = _Writers()
"""``backend`` value in ``fabric/config/lanes.toml`` → its writer factory (imports every backend module on first
use)."""


def has_writer(backend: str) -> bool:
    """Whether ingestion writes to ``backend`` (an unknown backend has no writer)."""
    try:
        return descriptor(backend).writer is not None
    except ConfigError:
        return False


def build_writer(spec: LaneSpec, resources: LaneResources) -> StoreWriter:
    """Build the writer of ``spec.backend`` with the shared ``resources``.

    Raises:
        ConfigError: the backend is unknown or has no writer, or its module cannot be imported.
    """
    factory = descriptor(spec.backend).writer
    if factory is None:
        valid = ", ".join(WRITERS)
        raise ConfigError(f"backend {spec.backend!r} has no store writer; valid: {valid}")
    return factory(spec, resources)


def build_writers(settings: Settings, resources: LaneResources) -> list[StoreWriter]:
    """Writers of every enabled lane of ``settings`` whose backend has one, in lane order."""
    return [
        build_writer(LaneSpec(name=lc.name, kind=lc.kind, backend=lc.backend, options=lc.options), resources)
        for lc in settings.enabled_lanes()
        if has_writer(lc.backend)
    ]
