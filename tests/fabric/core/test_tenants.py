"""Tenant homes, store paths and server-side names (fabric.core.tenants)."""

from __future__ import annotations

from pathlib import Path

import pytest

import fabric.core.tenants as mod
from fabric.core.errors import ConfigError
from fabric.core.tenants import DEFAULT_TENANT, scoped_name, store_path, stored_tenants, tenant_home, tenant_path


class TestDefaultKeepsTodaysPlaces:
    def test_home_paths_and_names_unchanged(self, tmp_path: Path) -> None:
        """The single-user ``default`` tenant reads and writes exactly what it always did."""
        assert tenant_home(tmp_path, DEFAULT_TENANT) == tmp_path
        assert tenant_path(tmp_path / "kw.sqlite", DEFAULT_TENANT) == tmp_path / "kw.sqlite"
        assert scoped_name("chunks", DEFAULT_TENANT) == "chunks"


class TestOtherTenants:
    def test_home_is_a_sub_folder(self, tmp_path: Path) -> None:
        """Another tenant's home is ``<home>/tenants/<tenant>``."""
        assert tenant_home(tmp_path, "acme") == tmp_path / "tenants" / "acme"

    def test_explicit_path_gets_a_sibling_folder(self, tmp_path: Path) -> None:
        """An explicit store path keeps its name inside ``tenants/<tenant>/`` next to it."""
        assert tenant_path(tmp_path / "s" / "kw.sqlite", "acme") == tmp_path / "s" / "tenants" / "acme" / "kw.sqlite"

    def test_store_path_prefers_the_option(self, tmp_path: Path) -> None:
        """``options.path`` (scoped) wins over the default under the tenant's home."""
        assert store_path("", tmp_path / "d.sqlite", "acme") == tmp_path / "d.sqlite"
        assert store_path(str(tmp_path / "o.sqlite"), tmp_path / "d", "acme") == tmp_path / "tenants/acme/o.sqlite"

    def test_server_names_are_suffixed(self) -> None:
        """Collections, indexes and databases get ``__<tenant>``."""
        assert scoped_name("chunks", "acme") == "chunks__acme"

    def test_long_names_stay_within_the_limit_and_unique(self) -> None:
        """A name over the server's limit keeps a tenant prefix plus 8 hash digits: bounded and distinct."""
        a, b = "x" * 62 + "a", "x" * 62 + "b"
        na, nb = scoped_name("fabric", a, limit=64), scoped_name("fabric", b, limit=64)
        assert len(na) == len(nb) == 64
        assert na != nb
        assert na.startswith("fabric__xxxx")

    def test_stored_tenants_are_the_valid_folders(self, tmp_path: Path) -> None:
        """The tenants with a folder under the home, sorted; files, ``default`` and unsafe names are none."""
        assert stored_tenants(tmp_path) == []
        for name in ("beta", "acme", "default", "Bad Name"):
            (tmp_path / "tenants" / name).mkdir(parents=True)
        (tmp_path / "tenants" / "file").write_text("")
        assert stored_tenants(tmp_path) == ["acme", "beta"]

    def test_base_too_long_for_a_tenant_is_refused(self) -> None:
        """A base leaving no room for the tenant is a clear configuration error."""
        with pytest.raises(ConfigError, match="too long"):
            scoped_name("d" * 60, "acme", limit=64)


@pytest.mark.parametrize("bad", ["", "Acme", "../etc", "a/b", "-x", "_x", "a b", "é", "a" * 64, "acme\n"])
def test_unsafe_tenant_names_are_refused(tmp_path: Path, bad: str) -> None:
    """Upper case, separators, dots, spaces, non-ASCII and over-long names never reach a path or a name."""
    with pytest.raises(ConfigError, match="tenant"):
        tenant_home(tmp_path, bad)
    with pytest.raises(ConfigError, match="tenant"):
        scoped_name("chunks", bad)


def test_public_api() -> None:
    """The module's exports."""
    assert set(mod.__all__) == {
        "DEFAULT_TENANT", "TENANTS_DIR", "check_tenant", "scoped_name", "store_path", "stored_tenants", "tenant_home",
        "tenant_path",
    }  # fmt: skip
