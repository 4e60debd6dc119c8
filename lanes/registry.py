"""Backend name → its declaration (:class:`~lanes.base.Backend`), read lazily from the backend's own module.

Each backend module declares ``BACKEND = Backend(...)`` (lane class, writer class, options parser, environment
variables, self-hosted or not). A backend named ``x`` lives in ``lanes/<kind folder>/x.py``, or in a package
``lanes/<kind folder>/x/`` whose ``lane.py`` declares it (found by the file names, without importing anything
else); names starting with ``_`` are helpers, never backends. A module is imported the
first time its backend is asked for, so building one lane never imports another's SDK. :data:`BACKENDS`, the
store writers, the environment variables and the self-hosted set are derived from the declarations (which
imports every backend module, once).

Adding a lane touches its module (with its ``BACKEND``), its test, one ``fabric/config/lanes.toml`` entry and one row
in ``docs/lanes.md``; nothing here.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path

from fabric.core.errors import ConfigError
from lanes.base import Backend, Lane, LaneFactory, LaneResources, LaneSpec

__all__ = [
    "BACKENDS",
    "MODULES",
    "build_lane",
    "descriptor",
    "descriptors",
    "env_options",
    "resolve",
    "self_hosted",
    "writers",
]

MODULES: Mapping[str, str] = {
    "fake": "lanes.fake",
}
"""Backends declared outside a kind folder."""

_ROOT = Path(__file__).parent
BACKEND_MODULE = "lane"
"""The module of a backend package (``lanes/<kind>/<backend>/lane.py``) that declares its ``BACKEND``."""


def _candidates() -> Iterator[tuple[str, str]]:
    """(backend name, declaring module) of every backend under ``lanes`` (listed from the files, nothing imported).

    A backend is a module ``lanes/<kind>/<name>.py`` or, when it is more than one file, a package
    ``lanes/<kind>/<name>/`` declaring it in ``lane.py``. Names starting with ``_`` are helpers shared by a kind's
    backends, never backends; the modules directly under ``lanes/`` are the contract and its helpers.
    """
    for folder in pkgutil.iter_modules([str(_ROOT)]):
        if not folder.ispkg:
            continue
        for mod in pkgutil.iter_modules([str(_ROOT / folder.name)]):
            if mod.name.startswith("_"):
                continue
            module = f"lanes.{folder.name}.{mod.name}"
            yield mod.name, f"{module}.{BACKEND_MODULE}" if mod.ispkg else module
    yield from MODULES.items()


def _module_of(backend: str) -> str | None:
    return next((module for name, module in _candidates() if name == backend), None)


class _Backends(Mapping[str, str]):
    """Backend name → declaring module, derived on first use (imports every backend module)."""

    @staticmethod
    @cache
    def _table() -> dict[str, str]:
        table: dict[str, str] = {}
        for _, module_name in _candidates():
            declared = getattr(importlib.import_module(module_name), "BACKEND", None)
            if isinstance(declared, Backend):
                table[declared.name] = module_name
        return dict(sorted(table.items()))

    def __getitem__(self, key: str) -> str:
        return self._table()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


BACKENDS: Mapping[str, str] = _Backends()
"""``backend`` value in ``fabric/config/lanes.toml`` → the module that declares it (derived from the declarations)."""


def descriptor(backend: str) -> Backend:
    """The declaration of ``backend``, importing its module on first use.

    Raises:
        ConfigError: unknown backend name, or its module cannot be imported or declares another backend.
    """
    module_name = _module_of(backend)
    if module_name is None:
        valid = ", ".join(BACKENDS)
        raise ConfigError(f"unknown backend {backend!r}; valid: {valid}", key="backend")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ConfigError(f"backend {backend!r} cannot be loaded: {exc}", key="backend") from None
    declared = getattr(module, "BACKEND", None)
    if not isinstance(declared, Backend) or declared.name != backend:
        valid = ", ".join(BACKENDS)
        raise ConfigError(f"unknown backend {backend!r} ({module_name} declares none); valid: {valid}", key="backend")
    return declared


def descriptors() -> list[Backend]:
    """Every backend's declaration (imports every backend module)."""
    return [descriptor(name) for name in BACKENDS]


def resolve(backend: str) -> LaneFactory:
    """The lane factory of ``backend``.

    Raises:
        ConfigError: unknown backend name.
    """
    return descriptor(backend).lane


def build_lane(spec: LaneSpec, resources: LaneResources) -> Lane:
    """Build the lane described by ``spec`` with the shared ``resources``."""
    return resolve(spec.backend)(spec, resources)


def writers() -> dict[str, Backend]:
    """Backend name → declaration, for the backends ingestion writes to."""
    return {d.name: d for d in descriptors() if d.writer is not None}


def env_options() -> dict[str, tuple[str, str]]:
    """Environment variable → (backend, option) over every declaration."""
    return {var: (d.name, option) for d in descriptors() for var, option in d.env.items()}


def self_hosted() -> frozenset[str]:
    """Backends that run next to the fabric (their hosts may resolve to private addresses)."""
    return frozenset(d.name for d in descriptors() if d.self_hosted)
