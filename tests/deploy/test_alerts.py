"""deploy/prometheus: the alert rules checked and unit-tested by the real promtool, over series the service exports.

promtool comes from Debian's ``prometheus`` package (``make test-deps`` installs it when missing); without it the
promtool tests skip with that message and the static checks still run.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from fabric.query.metrics import EngineMetrics
from fabric.serve.limits.tenants import TenantMetrics
from fabric.serve.observe import HttpMetrics

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"
SEED_THRESHOLDS = {  # seed 003's monitoring table and seed 001's latency bound: alert → (comparison, threshold)
    "FabricLaneSuccessRateLow": ("<", 0.90),
    "FabricFusionQualityLow": ("<", 0.7),
    "FabricDedupRateLow": ("<", 0.10),
    "FabricCitationCoverageLow": ("<", 0.80),
    "FabricResponseTimeHigh": (">", 3.0),
    "FabricSearchP95High": (">", 0.3),
}
OPERATIONS = {  # the service's own health: alert → (comparison, threshold)
    "FabricTargetDown": ("==", 0.0),
    "FabricTargetAbsent": ("==", 1.0),
    "FabricHttpErrorsHigh": (">", 0.01),
    "FabricLoadShedding": (">", 0.05),
    "FabricIngestTasksFailing": (">", 0.0),
    "FabricStoreNotWritable": ("<", 1.0),
    "FabricTenantSearchP95High": (">", 0.3),
}


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool not installed: run `make test-deps` (Debian package prometheus)")
    return found


def _run(*args: str, cwd: Path = PROMETHEUS) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_promtool(), *args], cwd=cwd, capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def rules() -> list[dict[str, Any]]:
    """Every rule of alerts.yml."""
    data = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())
    return [rule for group in data["groups"] for rule in group["rules"]]


class TestPromtool:
    def test_check_rules(self) -> None:
        """promtool check rules accepts the file."""
        out = _run("check", "rules", "alerts.yml")
        assert out.returncode == 0, out.stdout + out.stderr
        assert f"SUCCESS: {len(SEED_THRESHOLDS) + len(OPERATIONS)} rules found" in out.stdout

    def test_rule_unit_tests(self) -> None:
        """promtool test rules: every alert fires past its threshold and stays silent inside it."""
        out = _run("test", "rules", "alerts.test.yml")
        assert out.returncode == 0, out.stdout + out.stderr
        assert "SUCCESS" in out.stdout

    def test_unit_tests_cover_every_alert(self, rules: list[dict[str, Any]]) -> None:
        """alerts.test.yml has a firing case for every alert (with its rendered annotations) and a silent one."""
        tests = yaml.safe_load((PROMETHEUS / "alerts.test.yml").read_text())["tests"]
        cases = [c for t in tests for c in t["alert_rule_test"]]
        for rule in rules:
            mine = [c for c in cases if c["alertname"] == rule["alert"]]
            assert any(c["exp_alerts"] and "exp_annotations" in c["exp_alerts"][0] for c in mine), rule["alert"]
            assert any(not c["exp_alerts"] for c in mine), rule["alert"]

    def test_check_config(self, tmp_path: Path) -> None:
        """promtool check config accepts prometheus.yml (with the key file provided where compose mounts it)."""
        key = tmp_path / "metrics.key"
        key.write_text("fab_0123456789ab_" + "a" * 43)
        text = (PROMETHEUS / "prometheus.yml").read_text().replace("/run/fabric-keys/metrics.key", str(key))
        (tmp_path / "prometheus.yml").write_text(text)
        shutil.copy(PROMETHEUS / "alerts.yml", tmp_path / "alerts.yml")
        out = _run("check", "config", "prometheus.yml", cwd=tmp_path)
        assert out.returncode == 0, out.stdout + out.stderr


class TestRules:
    def test_one_rule_per_threshold(self, rules: list[dict[str, Any]]) -> None:
        """The alerts are the monitoring thresholds and the service's own health, each comparing with its number."""
        assert {r["alert"] for r in rules} == set(SEED_THRESHOLDS) | set(OPERATIONS)
        for rule in rules:
            op, value = {**SEED_THRESHOLDS, **OPERATIONS}[rule["alert"]]
            found = re.search(r"([<>]|==) ([0-9.]+)$", rule["expr"].strip())
            assert found is not None, rule["alert"]
            assert (found.group(1), float(found.group(2))) == (op, value), rule["alert"]

    def test_annotations_name_subsystem_and_first_step(self, rules: list[dict[str, Any]]) -> None:
        """Every alert names the subsystem and starts its remediation with the first step; has a severity."""
        for rule in rules:
            notes = rule["annotations"]
            assert notes["subsystem"].strip(), rule["alert"]
            assert notes["remediation"].startswith("First: "), rule["alert"]
            assert "{{ $value" in notes["summary"] or "$value }}" in notes["summary"], rule["alert"]
            assert rule["labels"]["severity"] in ("warning", "critical")
            assert rule.get("for"), rule["alert"]

    def test_series_are_exported_by_the_service(self, rules: list[dict[str, Any]]) -> None:
        """Every fabric_* series an alert or its remediation names is one the service's registry exports."""
        registry = CollectorRegistry(auto_describe=True)
        EngineMetrics(registry)
        TenantMetrics(registry)
        HttpMetrics(registry)
        exported: set[str] = set()
        for source in (ROOT / "fabric").rglob("*.py"):  # the series other parts register (admission, tasks)
            for kind, name in re.findall(r'\b(Counter|Gauge|Histogram)\(\s*"(fabric_[a-z0-9_]+)"', source.read_text()):
                exported.add(name)
                exported.update(
                    name + s for s in {"Counter": ("_total",), "Histogram": ("_bucket", "_sum", "_count")}.get(kind, ())
                )
        for family in registry.collect():
            kind = family.type
            exported.add(family.name)
            suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}.get(kind, ())
            exported.update(family.name + s for s in suffixes)
        for rule in rules:
            text = rule["expr"] + rule["annotations"]["remediation"]
            for name in set(re.findall(r"\bfabric_[a-z0-9_]+", text)):
                assert name in exported, f"{rule['alert']}: {name} is not exported"


def test_make_test_installs_promtool() -> None:
    """`make test` runs test-deps, which installs Debian's prometheus package only when promtool is missing."""
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^test: .*\btest-deps\b", makefile, re.M)
    block = makefile.split("\ntest-deps:")[1].split("\n\n")[0]
    assert "command -v promtool" in block
    assert 'missing="$$missing prometheus"' in block
    assert "apt-get install -y -q --no-install-recommends $$missing" in block
