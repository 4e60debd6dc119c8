"""The backend registry: declarations read lazily from each backend's module, everything else derived."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import lanes.registry as mod
from fabric.core.errors import ConfigError
from fabric.core.models import LaneKind
from fabric.ingest.writers import WRITERS
from fabric.settings import ENV_URLS, SELF_HOSTED_BACKENDS
from lanes.base import Backend, LaneResources, LaneSpec
from lanes.fake import FakeLane

ROOT = Path(__file__).resolve().parents[2]


class TestDescriptors:
    def test_every_backend_declares_itself(self) -> None:
        """Each backend module declares a Backend with its own name; the table is derived from them."""
        assert set(mod.BACKENDS) >= {
            "fake", "sqlite_fts", "meilisearch", "qdrant", "sqlite_graph", "arango", "searxng", "wikipedia", "mdn",
            "web_cache", "rss", "quotes",
        }  # fmt: skip
        for name, module in mod.BACKENDS.items():
            declared = mod.descriptor(name)
            assert isinstance(declared, Backend)
            assert (declared.name, declared.lane.__module__) == (name, module)

    def test_configured_backends_resolve(self) -> None:
        """Every backend named in fabric/config/*.toml has a declaration."""
        for path in sorted((ROOT / "config").glob("*.toml")):
            for lane in tomllib.loads(path.read_text()).get("lanes", {}).values():
                if "backend" in lane:
                    assert mod.descriptor(lane["backend"]).name == lane["backend"], path.name

    def test_unknown_backend_lists_the_valid_ones(self) -> None:
        """An unknown name is a ConfigError naming the valid backends."""
        with pytest.raises(ConfigError, match=r"unknown backend 'nope'; valid: arango, .*fake, .*web_cache"):
            mod.descriptor("nope")

    def test_helpers_are_not_backends(self) -> None:
        """A helper shared by a kind's backends (``lanes/graph/_extract``) is never a candidate, and a name no
        backend declares is refused listing the valid ones."""
        assert all(not name.startswith("_") for name, _ in mod._candidates())
        assert "lanes.graph._extract.entities" not in dict(mod._candidates()).values()
        with pytest.raises(ConfigError, match=r"unknown backend '_extract'; valid: "):
            mod.descriptor("_extract")

    def test_backend_package_declares_in_its_lane_module(self) -> None:
        """A backend of several files is a package; its ``lane.py`` declares it."""
        assert mod.BACKENDS["sqlite_fts"] == "lanes.keyword.sqlite_fts.lane"
        assert mod.BACKENDS["sqlite_graph"] == "lanes.graph.sqlite_graph.lane"

    def test_build_lane(self) -> None:
        """build_lane builds the declared lane class from a spec and the shared resources."""
        lane = mod.build_lane(LaneSpec(name="k", kind=LaneKind.KEYWORD, backend="fake"), LaneResources())
        assert isinstance(lane, FakeLane)
        assert mod.resolve("fake") is FakeLane


class TestDerived:
    def test_writers(self) -> None:
        """The backends ingestion writes to are the ones whose declaration names a writer."""
        assert set(mod.writers()) == set(WRITERS) == {
            "sqlite_fts", "qdrant", "numpy_flat", "lancedb", "sqlite_graph", "meilisearch", "arango",
        }  # fmt: skip

    def test_environment_variables(self) -> None:
        """ENV_URLS is derived from the declarations and keeps the documented names."""
        assert dict(ENV_URLS) == mod.env_options()
        assert {
            "FABRIC_QDRANT_URL", "FABRIC_QDRANT_API_KEY", "FABRIC_MEILI_URL", "FABRIC_MEILI_KEY", "FABRIC_ARANGO_URL",
            "FABRIC_ARANGO_PASSWORD", "FABRIC_SEARXNG_URL",
        } <= set(ENV_URLS)  # fmt: skip
        assert ENV_URLS["FABRIC_MEILI_KEY"] == ("meilisearch", "api_key")

    def test_self_hosted(self) -> None:
        """The self-hosted set is derived from the declarations."""
        assert set(SELF_HOSTED_BACKENDS) == set(mod.self_hosted()) == {"searxng", "meilisearch", "arango", "qdrant"}
        assert "wikipedia" not in SELF_HOSTED_BACKENDS

    def test_secrets_come_only_from_the_environment(self) -> None:
        """No config file sets an option a backend declares secret, and every secret has its variable."""
        for path in sorted((ROOT / "config").glob("*.toml")):
            for name, lane in tomllib.loads(path.read_text()).get("lanes", {}).items():
                if "backend" in lane:
                    secrets = mod.descriptor(lane["backend"]).secrets
                    assert not secrets & set(lane.get("options", {})), f"{path.name}: lanes.{name}"
        for declared in mod.descriptors():
            assert declared.secrets <= set(declared.env.values()), declared.name


def test_docs_table_matches_the_declarations() -> None:
    """docs/lanes.md has one row per backend, with the module, variables, self-hosting and writer declared."""
    text = (ROOT / "docs" / "lanes.md").read_text().split("## Backends", 1)[1]
    rows = {}
    for line in text.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0] not in ("backend", "---"):
            rows[cells[0]] = cells
    assert set(rows) == set(mod.BACKENDS)
    for name, (_, _kind, module, env, hosted, writer) in rows.items():
        declared = mod.descriptor(name)
        assert module == mod.BACKENDS[name].replace(".", "/") + ".py", name
        assert {v.strip(" `") for v in env.split(",") if v.strip()} == set(declared.env), name
        assert (hosted == "yes") is declared.self_hosted, name
        assert writer == (getattr(declared.writer, "__name__", "") if declared.writer else ""), name


def test_one_backend_imports_no_other_sdk() -> None:
    """Resolving the web lane imports neither another backend's module nor the Qdrant SDK."""
    code = (
        "import json, sys, lanes.registry as r; r.descriptor('searxng');"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('lanes.', 'qdrant_client', 'arango')))))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout)
    assert "lanes.web.searxng" in loaded
    assert not [m for m in loaded if m.startswith(("qdrant_client", "arango", "lanes.vector", "lanes.graph"))]


def test_public_api() -> None:
    """The registry exports its table, the lookups and the derived views."""
    assert set(mod.__all__) == {
        "BACKENDS", "MODULES", "build_lane", "descriptor", "descriptors", "env_options", "resolve", "self_hosted",
        "writers",
    }  # fmt: skip
