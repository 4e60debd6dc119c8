"""deploy/grafana: the dashboard's JSON, what it shows, and every PromQL expression in it parsed by the real promtool
over series the service exports; its provisioning in the compose file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.test_alerts import _run

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GRAFANA / "dashboards" / "fabric.json").read_text())
    return data


def _exprs(dashboard: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in dashboard["panels"] for t in p["targets"]]


def test_every_expression_parses(dashboard: dict[str, Any], tmp_path: Path) -> None:
    """Each panel's PromQL, written as a recording rule, passes `promtool check rules`."""
    exprs = _exprs(dashboard)
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:expr_{i}", "expr": e} for i, e in
                                                        enumerate(exprs)]}]}  # fmt: skip
    (tmp_path / "dashboard.rules.yml").write_text(yaml.safe_dump(rules))
    out = _run("check", "rules", "dashboard.rules.yml", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in out.stdout


def test_it_shows_what_an_operator_needs(dashboard: dict[str, Any]) -> None:
    """Query rate and latency, lane outcomes and latency, penalties and suspensions, admission, ingestion tasks, the
    monitoring targets, per-tenant rate and p95."""
    text = " ".join(_exprs(dashboard))
    for series in (
        "fabric_queries_total", "fabric_query_latency_seconds_bucket", "fabric_lane_outcomes_total",
        "fabric_lane_latency_seconds_bucket", "fabric_provider_penalty", "fabric_provider_suspended",
        "fabric_admission_active", "fabric_admission_queued", "fabric_admission_rejected_total",
        "fabric_ingest_tasks_total", "fabric_lane_agreement_sum", "fabric_dedup_removed_total",
        "fabric_citation_sentences_total", "fabric_tenant_requests_total",
        "fabric_http_request_duration_seconds_bucket",
    ):  # fmt: skip
        assert series in text, series
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    assert all(t["datasource"]["uid"] == "prometheus" for p in dashboard["panels"] for t in p["targets"])


def test_series_are_exported(dashboard: dict[str, Any]) -> None:
    """Every fabric_* series a panel reads is one the code registers."""
    declared: set[str] = set()
    for source in (ROOT / "fabric").rglob("*.py"):
        for kind, name in re.findall(r'\b(Counter|Gauge|Histogram|Info)\(\s*"(fabric_[a-z0-9_]+)"', source.read_text()):
            suffixes = {"Counter": ("_total",), "Histogram": ("_bucket", "_sum", "_count"), "Info": ("_info",)}
            declared.update({name, *(name + s for s in suffixes.get(kind, ()))})
    for name in set(re.findall(r"\bfabric_[a-z0-9_]+", " ".join(_exprs(dashboard)))):
        assert name in declared, name


def test_provisioned_in_compose() -> None:
    """Grafana is pinned, healthy, and provisioned with the data source and the dashboard folder (read-only)."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    grafana = compose["services"]["grafana"]
    assert re.match(r"grafana/grafana:\d+\.\d+\.\d+$", grafana["image"])
    assert "/api/health" in " ".join(grafana["healthcheck"]["test"])
    assert "./deploy/grafana/dashboards:/var/lib/grafana/dashboards:ro" in grafana["volumes"]
    source = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text())
    assert source["datasources"][0]["uid"] == "prometheus"
    assert source["datasources"][0]["url"] == "http://prometheus:9090"
    provider = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "fabric.yml").read_text())
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"
