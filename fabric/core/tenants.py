"""Where a tenant's data lives: its home folder, its store paths and its server-side names.

Every store is isolated per tenant by *place*, never by a filter (docs/servers.md, "Tenants"):

- embedded stores (SQLite FTS5 keyword, SQLite graph, numpy_flat vectors, Qdrant local, the ledger, the spool)
  live under the tenant's home, ``<home>/tenants/<tenant>/`` (:func:`tenant_home`); a store whose lane sets an
  explicit ``options.path`` gets the same sub-folder next to that path (:func:`tenant_path`);
- server stores get a name of their own per tenant (:func:`scoped_name`): a Qdrant collection, a Meilisearch
  index, an ArangoDB database.

The ``default`` tenant keeps today's paths and names unchanged, so the embedded CLI (one user, no keys) reads
and writes exactly what it always did. Tenant names are validated by :func:`check_tenant` (1 to 63 of
``a-z 0-9 - _``, starting with a letter or digit): safe as a folder name and inside every server's name rules.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from fabric.core.errors import ConfigError

__all__ = [
    "DEFAULT_TENANT",
    "TENANTS_DIR",
    "check_tenant",
    "scoped_name",
    "store_path",
    "stored_tenants",
    "tenant_home",
    "tenant_path",
]

_TENANT = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


def check_tenant(name: str) -> str:
    """The tenant name, validated.

    Raises:
        ConfigError: not 1 to 63 of lower-case letters, digits, ``-`` and ``_`` (starting with a letter or digit).
    """
    if not _TENANT.fullmatch(name):
        raise ConfigError(f"tenant {name!r}: expected 1-63 characters of a-z, 0-9, '-', '_' (not starting with - or _)")
    return name


DEFAULT_TENANT = "default"
"""The tenant of the embedded CLI and of every request in open mode (no keys): today's paths and names."""
TENANTS_DIR = "tenants"
"""Folder under the home (or next to an explicit store path) holding one sub-folder per other tenant."""

_HASH_CHARS = 8


def tenant_home(home: Path, tenant: str) -> Path:
    """The home of ``tenant``: ``home`` itself for ``default``, else ``<home>/tenants/<tenant>``.

    Raises:
        ConfigError: invalid tenant name.
    """
    return home if check_tenant(tenant) == DEFAULT_TENANT else home / TENANTS_DIR / tenant


def stored_tenants(home: Path) -> list[str]:
    """The tenants other than ``default`` with a folder under ``home`` (``<home>/tenants/<tenant>``), sorted; a
    folder whose name is no valid tenant name is not one."""
    folder = home / TENANTS_DIR
    if not folder.is_dir():
        return []
    names = (p.name for p in folder.iterdir() if p.is_dir() and p.name != DEFAULT_TENANT)
    return sorted(name for name in names if _TENANT.fullmatch(name))


def tenant_path(path: Path, tenant: str) -> Path:
    """``path`` for ``default``, else ``<parent>/tenants/<tenant>/<name>`` (an explicit store path, per tenant).

    Raises:
        ConfigError: invalid tenant name.
    """
    if check_tenant(tenant) == DEFAULT_TENANT:
        return path
    if path.name == "":
        raise ConfigError(f"store path {str(path)!r} has no name to scope per tenant")
    return path.parent / TENANTS_DIR / tenant / path.name


def store_path(option: object, default: Path, tenant: str) -> Path:
    """A store's file or folder: the lane's ``options.path`` (scoped by :func:`tenant_path`) when set, else
    ``default`` (already under the tenant's home)."""
    return tenant_path(Path(str(option)), tenant) if option else default


def scoped_name(base: str, tenant: str, *, limit: int = 64) -> str:
    """The server-side name (collection, index, database) of ``base`` for ``tenant``: ``base`` for ``default``,
    else ``<base>__<tenant>``; a name longer than ``limit`` keeps a prefix of the tenant and ends with 8 hex
    digits of its hash, so it stays unique and within the server's length rule.

    Raises:
        ConfigError: invalid tenant name, or ``base`` leaves no room for a tenant within ``limit``.
    """
    if check_tenant(tenant) == DEFAULT_TENANT:
        return base
    name = f"{base}__{tenant}"
    if len(name) <= limit:
        return name
    room = limit - len(base) - 2 - 1 - _HASH_CHARS
    if room < 1:
        raise ConfigError(f"name {base!r} is too long to add a tenant within {limit} characters")
    digest = hashlib.sha256(tenant.encode()).hexdigest()[:_HASH_CHARS]
    return f"{base}__{tenant[:room]}_{digest}"
