"""Static validation of the compose stack: no Docker engine runs here, so the files must be right by construction."""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import yaml
from yarl import URL

from fabric.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ("qdrant", "meilisearch", "arangodb", "searxng")
PROMETHEUS = ROOT / "deploy" / "prometheus"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """The parsed docker-compose.yml."""
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data


class TestComposeFile:
    def test_services(self, compose: dict[str, Any]) -> None:
        """The stack has the four backends, PostgreSQL, the fabric replicas with their set-up and proxy, Prometheus and
        Grafana."""
        assert set(compose["services"]) == {
            *BACKENDS, "postgres", "fabric-init", "fabric", "proxy", "prometheus", "grafana",
        }  # fmt: skip

    def test_images_pinned(self, compose: dict[str, Any]) -> None:
        """Every image carries an explicit version tag (never latest)."""
        for name, svc in compose["services"].items():
            image = svc["image"]
            tag = image.rsplit(":", 1)[1] if ":" in image else ""
            assert re.match(r"v?\d+\.\d+", tag), f"{name}: {image} is not pinned"

    def test_health_checks(self, compose: dict[str, Any]) -> None:
        """Every service has a health check with a test, interval and retries."""
        for name, svc in compose["services"].items():
            hc = svc.get("healthcheck") or {}
            assert {"test", "interval", "retries"} <= set(hc), name

    def test_fabric_waits_for_healthy_backends(self, compose: dict[str, Any]) -> None:
        """fabric depends on every backend with condition service_healthy."""
        deps = compose["services"]["fabric"]["depends_on"]
        assert {k: v["condition"] for k, v in deps.items()} == {
            **dict.fromkeys((*BACKENDS, "postgres"), "service_healthy"),
            "fabric-init": "service_completed_successfully",
        }  # fmt: skip

    def test_named_volumes(self, compose: dict[str, Any]) -> None:
        """Stateful services mount named volumes that are declared at the top level."""
        declared = set(compose["volumes"])
        for name in (*BACKENDS, "postgres", "fabric"):
            mounts = [v.split(":")[0] for v in compose["services"][name].get("volumes", [])]
            named = [m for m in mounts if not m.startswith((".", "/"))]
            assert named, f"{name} has no named volume"
            assert set(named) <= declared

    def test_ports_bound_to_loopback(self, compose: dict[str, Any]) -> None:
        """Published ports listen on 127.0.0.1 only, on the ports compose-test expects."""
        ports = {n: s["ports"][0] for n, s in compose["services"].items() if "ports" in s}
        assert all(p.startswith("127.0.0.1:") for p in ports.values())
        assert ports["proxy"] == "127.0.0.1:${FABRIC_PORT:-8080}:8080"  # the replicas' one address
        assert "postgres" not in ports  # reached only inside the stack
        assert (ports["qdrant"], ports["meilisearch"], ports["arangodb"], ports["searxng"]) == (
            "127.0.0.1:6333:6333",
            "127.0.0.1:7700:7700",
            "127.0.0.1:8529:8529",
            "127.0.0.1:8888:8080",
        )

    def test_secrets_from_env_example(self, compose: dict[str, Any]) -> None:
        """Every ${VAR} the file needs is documented in .env.example, and required ones fail loudly."""
        text = (ROOT / "docker-compose.yml").read_text()
        used = set(re.findall(r"\$\{(\w+)", text))
        documented = {
            line.split("=", 1)[0]
            for line in (ROOT / ".env.example").read_text().splitlines()
            if "=" in line and not line.startswith("#")
        }
        assert used <= documented
        assert "${MEILI_MASTER_KEY:?" in text

    def test_searxng_json_enabled(self, compose: dict[str, Any]) -> None:
        """The mounted SearXNG settings enable the json format the web lane requests."""
        mount = compose["services"]["searxng"]["volumes"][0]
        assert mount.endswith(":/etc/searxng/settings.yml:ro")
        settings = yaml.safe_load((ROOT / mount.split(":")[0]).read_text())
        assert "json" in settings["search"]["formats"]

    def test_fabric_built_from_dockerfile(self, compose: dict[str, Any]) -> None:
        """The fabric service builds the repository Dockerfile, whose base image is pinned and which serves."""
        assert compose["services"]["fabric"]["build"]["dockerfile"] == "Dockerfile"
        dockerfile = (ROOT / "Dockerfile").read_text()
        assert re.search(r"^ARG PYTHON_IMAGE=python:\d+\.\d+\.\d+-", dockerfile, re.M)
        assert re.search(r"^FROM \$\{PYTHON_IMAGE\}", dockerfile, re.M)
        assert '"fabric", "serve"' in dockerfile


def _tag(compose: dict[str, Any], service: str) -> str:
    return str(compose["services"][service]["image"]).rsplit(":", 1)[1].removeprefix("v")


class TestImagesMatchClients:
    """Each server image against the rule of the client version pyproject.toml pins (and the venv runs)."""

    def _pinned(self, package: str) -> str:
        pins = re.findall(rf'"{re.escape(package)}==([\w.]+)"', (ROOT / "pyproject.toml").read_text())
        assert pins, f"{package} is not pinned in pyproject.toml"
        assert pins[0] == version(package), f"{package}: venv runs {version(package)}, pyproject pins {pins[0]}"
        return pins[0]

    def test_qdrant_within_the_clients_window(self, compose: dict[str, Any]) -> None:
        """qdrant-client's own check (same major, minor at most one apart) accepts the image's server version."""
        from qdrant_client.common.version_check import is_compatible

        client = self._pinned("qdrant-client")
        assert is_compatible(client, _tag(compose, "qdrant")), f"qdrant {_tag(compose, 'qdrant')} vs client {client}"
        assert not is_compatible(client, "1.15.4")  # the tag this stack pinned before: five minors away

    def test_meilisearch_is_v1(self, compose: dict[str, Any]) -> None:
        """The meilisearch Python client (0.x) guarantees compatibility with Meilisearch v1.x."""
        assert self._pinned("meilisearch").startswith("0.")
        assert _tag(compose, "meilisearch").split(".")[0] == "1"

    def test_arango_at_least_3_11(self, compose: dict[str, Any]) -> None:
        """python-arango 8.x requires ArangoDB 3.11 or later."""
        assert self._pinned("python-arango").startswith("8.")
        major, minor = (int(x) for x in _tag(compose, "arangodb").split(".")[:2])
        assert (major, minor) >= (3, 11)


class TestPrometheus:
    def test_mounts_rules_and_config(self, compose: dict[str, Any]) -> None:
        """Prometheus mounts the checked-in config and alert rules, read-only."""
        mounts = compose["services"]["prometheus"]["volumes"]
        assert "./deploy/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in mounts
        assert "./deploy/prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro" in mounts
        config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
        assert config["rule_files"] == ["alerts.yml"]  # relative to the config file: /etc/prometheus/alerts.yml

    def test_scrapes_fabric_with_a_provisioned_key(self, compose: dict[str, Any]) -> None:
        """The scrape job finds every fabric replica through Docker's DNS and scrapes it with a bearer key file that
        fabric-init creates, before the replicas start, on a volume it shares with Prometheus (fabric needs a key to
        listen on 0.0.0.0)."""
        (job,) = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())["scrape_configs"]
        assert job["dns_sd_configs"][0] | {"refresh_interval": None} == {
            "names": ["fabric"], "type": "A", "port": 8080, "refresh_interval": None,
        }  # fmt: skip
        assert job["metrics_path"] == "/metrics"
        key_file = job["authorization"]["credentials_file"]
        key_dir = key_file.rsplit("/", 1)[0]
        init, fabric, prom = (compose["services"][n] for n in ("fabric-init", "fabric", "prometheus"))
        assert f"fabric_keys:{key_dir}" in init["volumes"]
        assert f"fabric_keys:{key_dir}:ro" in prom["volumes"]
        command = " ".join(init["command"])
        assert f"--token-file {key_file} --if-missing" in command
        assert "fabric keys create" in command
        assert fabric["command"] == ["fabric", "serve", "--host", "0.0.0.0", "--port", "8080"]  # no --insecure
        assert f"mkdir -p /data /cache {key_dir}" in (ROOT / "Dockerfile").read_text()  # owned by the fabric user

    def test_same_release_as_the_checking_promtool(self, compose: dict[str, Any]) -> None:
        """The image runs the Prometheus release whose promtool validates the rules in tests/deploy/test_alerts.py."""
        promtool = shutil.which("promtool")
        if promtool is None:
            pytest.skip("promtool not installed (make test-deps installs Debian's prometheus package)")
        out = subprocess.run([promtool, "--version"], capture_output=True, text=True, check=True)
        found = re.search(r"version (\d+\.\d+\.\d+)", out.stdout + out.stderr)
        assert found is not None
        assert _tag(compose, "prometheus") == found.group(1)


class TestComposeProfile:
    def test_lanes_point_at_service_names(self) -> None:
        """fabric/config/compose.toml switches lanes to the server backends at the compose service names."""
        settings = load_settings(profile="compose", env={})
        lanes = settings.lanes
        hosts = {name: URL(lanes[name].options["url"]).host for name in ("keyword", "vector", "graph", "web")}
        assert hosts == {"keyword": "meilisearch", "vector": "qdrant", "graph": "arangodb", "web": "searxng"}
        assert (lanes["keyword"].backend, lanes["graph"].backend, lanes["web"].backend) == (
            "meilisearch",
            "arango",
            "searxng",
        )

    def test_web_and_news_enabled(self) -> None:
        """The compose profile enables web (with keyless Wikipedia and MDN) and news lanes."""
        enabled = {lc.name for lc in load_settings(profile="compose", env={}).enabled_lanes()}
        assert {"web", "wikipedia", "mdn", "news"} <= enabled

    def test_env_urls_override_profile(self) -> None:
        """FABRIC_MEILI_URL (set by make compose-test) overrides the service-name URL."""
        settings = load_settings(profile="compose", env={"FABRIC_MEILI_URL": "http://127.0.0.1:7700"})
        assert settings.lanes["keyword"].options["url"] == "http://127.0.0.1:7700"

    def test_profile_lanes_build(self) -> None:
        """Every lane of the compose profile that is ours builds from its options (no I/O in constructors)."""
        from lanes.base import LaneResources, LaneSpec
        from lanes.registry import build_lane

        for lc in load_settings(profile="compose", env={}).enabled_lanes():
            if lc.backend in ("qdrant",):
                continue
            spec = LaneSpec(name=lc.name, kind=lc.kind, backend=lc.backend, options=lc.options)
            assert build_lane(spec, LaneResources()).name == lc.name

    def test_makefile_targets(self) -> None:
        """make compose-up / compose-test exist and compose-test runs the integration marker with the URLs set."""
        makefile = (ROOT / "Makefile").read_text()
        assert "compose-up:" in makefile
        assert "compose-test:" in makefile
        block = makefile.split("\ncompose-test:")[1]
        for var in ("FABRIC_QDRANT_URL", "FABRIC_MEILI_URL", "FABRIC_ARANGO_URL", "FABRIC_SEARXNG_URL"):
            assert var in block
        assert "-m integration" in block


class TestReplicas:
    """Several fabric replicas behind one address share their state in the stack's PostgreSQL (docs/replicas.md)."""

    def test_two_replicas_behind_the_proxy(self, compose: dict[str, Any]) -> None:
        """fabric runs at least two replicas without a port of their own; the proxy round-robins over them and
        re-resolves the service name (so --scale needs no reload)."""
        fabric = compose["services"]["fabric"]
        assert fabric["deploy"]["replicas"] >= 2
        assert "ports" not in fabric
        assert compose["services"]["proxy"]["depends_on"] == {"fabric": {"condition": "service_healthy"}}
        conf = (ROOT / "deploy" / "nginx" / "fabric.conf").read_text()
        assert re.search(r"server fabric:8080 resolve;", conf)
        assert "resolver 127.0.0.11" in conf
        assert "./deploy/nginx/fabric.conf:/etc/nginx/conf.d/default.conf:ro" in compose["services"]["proxy"]["volumes"]

    def test_replicas_share_state_url_and_home(self, compose: dict[str, Any]) -> None:
        """fabric and fabric-init name the stack's PostgreSQL in FABRIC_STATE_URL (password from .env) and mount
        one home volume; the settings read it."""
        url = "postgresql://fabric:${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD in .env}@postgres:5432/fabric"
        pg = compose["services"]["postgres"]["environment"]
        assert (pg["POSTGRES_USER"], pg["POSTGRES_DB"]) == ("fabric", "fabric")
        for name in ("fabric", "fabric-init"):
            svc = compose["services"][name]
            assert svc["environment"]["FABRIC_STATE_URL"] == url
            assert "fabric_data:/data" in svc["volumes"]
        settings = load_settings(profile="compose", env={"FABRIC_STATE_URL": "postgresql://u:p@postgres:5432/fabric"})
        assert settings.state_url == "postgresql://u:p@postgres:5432/fabric"

    def test_postgres_major_matches_the_tested_server(self, compose: dict[str, Any]) -> None:
        """The image runs the PostgreSQL major version the tests run against (Debian's postgresql package)."""
        from tests.support.postgres import find_bin

        folder = find_bin()
        if folder is None:
            pytest.skip("PostgreSQL server binaries not installed (make test-deps installs Debian's postgresql)")
        out = subprocess.run([str(folder / "postgres"), "--version"], capture_output=True, text=True, check=True)
        found = re.search(r"(\d+)\.\d+", out.stdout)
        assert found is not None
        assert _tag(compose, "postgres").split(".")[0] == found.group(1)

    def test_docs_and_test_deps(self) -> None:
        """docs/replicas.md explains scaling out; make test-deps installs the PostgreSQL server for the tests."""
        doc = (ROOT / "docs" / "replicas.md").read_text()
        for words in ("FABRIC_STATE_URL", "--scale fabric=", "SKIP LOCKED", "Redis"):
            assert words in doc
        block = (ROOT / "Makefile").read_text().split("\ntest-deps:")[1].split("\n\n")[0]
        assert "postgresql" in block
        assert "initdb" in block


class TestFabricImage:
    def test_every_fabric_health_check_asks_readiness(self, compose: dict[str, Any]) -> None:
        """The fabric replicas and the proxy in front of them are healthy when /readyz says ready, not /healthz."""
        for name in ("fabric", "proxy"):
            probe = " ".join(compose["services"][name]["healthcheck"]["test"])
            assert "/readyz" in probe, name
            assert "/healthz" not in probe, name

    def test_dockerfile_builds_in_stages_and_runs_unprivileged(self) -> None:
        """A build stage makes the wheel; the image installs it with the shared install script, drops root, keeps the
        home and cache on volumes, warms the model at build time, and its HEALTHCHECK asks /readyz."""
        text = (ROOT / "Dockerfile").read_text()
        assert text.count("\nFROM ") + text.startswith("FROM ") >= 2
        assert "AS build" in text
        assert "deploy/install.sh" in text
        assert re.search(r"^USER 10001$", text, re.M)  # the fabric user, by number (hadolint DL3066)
        assert 'VOLUME ["/data", "/cache"]' in text
        assert "RUN fabric warm" in text
        health = text[text.index("HEALTHCHECK") :]
        assert "/readyz" in health.split("\nCMD")[0] + health.split("\n")[1]

    def test_fabric_cache_is_a_named_volume(self, compose: dict[str, Any]) -> None:
        """The replicas keep the model export and embeddings on a volume, seeded by the image's warm cache."""
        assert "fabric_cache:/cache" in compose["services"]["fabric"]["volumes"]
        assert "fabric_cache" in compose["volumes"]
