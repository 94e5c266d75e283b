"""The compose stack as Docker Compose would take it: valid against the Compose specification's
schema (check-jsonschema's vendored copy, offline), Prometheus's and Alertmanager's configs
checked by their own tools, and every name one service gives another (a dependency, a volume, a
mounted file, a scrape target, a datasource) pointing at something that exists. No image can be
pulled here: the stack is checked, not run (docs/deployment.md says so)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from jetwatch.exporters.metrics_server import parse_address
from tests.helpers import known_variables

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "deploy" / "compose"
FILE = COMPOSE / "compose.yaml"
CHECK_JSONSCHEMA = Path(sys.executable).parent / "check-jsonschema"


@pytest.fixture(scope="module")
def stack() -> dict[str, Any]:
    return yaml.safe_load(FILE.read_text())  # the safe loader reads the `<<` merge keys Compose reads


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CHECK_JSONSCHEMA), "--builtin-schema", "vendor.compose-spec", str(path)],
                          capture_output=True, text=True, timeout=120)


def test_the_stack_is_valid_against_the_compose_specification():
    said = validate(FILE)
    assert said.returncode == 0, said.stdout + said.stderr


def test_the_schema_check_fails_a_stack_that_is_not_compose(tmp_path):
    broken = yaml.safe_load(FILE.read_text())
    broken["services"]["collector"]["depends_on"] = 5
    (tmp_path / "compose.yaml").write_text(yaml.safe_dump(broken))
    assert validate(tmp_path / "compose.yaml").returncode == 1


def test_the_stack_runs_nats_jetwatch_by_role_prometheus_alertmanager_and_grafana(stack):
    services = stack["services"]
    assert {"n1", "n2", "n3", "workload", "collector", "dashboard", "pipeline", "prometheus", "alertmanager",
            "grafana"} <= set(services)
    commands = {name: services[name]["command"] for name in ("collector", "dashboard")}
    assert commands == {"collector": ["jetwatch", "collect"], "dashboard": ["jetwatch", "dashboard"]}
    assert "jetwatch pipeline run" in " ".join(services["pipeline"]["command"])
    for name in ("workload", "collector", "dashboard", "pipeline"):
        assert services[name]["read_only"] is True, name
        env = services[name]["environment"]
        assert not any("PASSWORD" in k or "@" in str(v) for k, v in env.items()), name  # no secret in the file


def test_every_variable_the_stack_sets_is_one_jetwatch_reads(stack):
    named = {k for s in stack["services"].values() for k in (s.get("environment") or {}) if k.startswith("JETWATCH_")}
    assert named - known_variables() == set()


def test_every_name_a_service_gives_exists(stack):
    services, volumes = stack["services"], set(stack.get("volumes") or {})
    for name, service in services.items():
        depends = service.get("depends_on") or []
        for other in depends if isinstance(depends, list) else list(depends):
            assert other in services, (name, other)
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            if source.startswith("."):
                assert (COMPOSE / source).exists(), (name, source)
            else:
                assert source in volumes, (name, source)
        build = service.get("build")
        if build:
            assert (COMPOSE / build["context"] / build["dockerfile"]).exists(), name
    used = {m.split(":")[0] for s in services.values() for m in s.get("volumes", [])}
    assert volumes <= used, volumes - used


def test_prometheus_scrapes_the_collector_loads_the_shipped_rules_and_alerts_through_alertmanager(stack, tmp_path):
    services = stack["services"]
    config = yaml.safe_load((COMPOSE / "prometheus.yml").read_text())
    [target] = config["scrape_configs"][0]["static_configs"][0]["targets"]
    host, port = target.split(":")
    listen = parse_address(services[host]["environment"]["JETWATCH_METRICS_ADDRESS"])
    assert listen == ("0.0.0.0", int(port))
    mounts = dict(m.rsplit(":", 1)[0].split(":") for m in services["prometheus"]["volumes"] if m.startswith("."))
    [rules] = config["rule_files"]
    shipped = {target: source for source, target in mounts.items()}[rules]
    assert (COMPOSE / shipped).resolve() == ROOT / "deploy" / "prometheus" / "jetwatch-rules.yml"
    [alertmanager] = config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert alertmanager.split(":")[0] in services
    # promtool reads the rule file where the container mounts it from.
    local = tmp_path / "prometheus.yml"
    local.write_text(yaml.safe_dump({**config, "rule_files": [str((COMPOSE / shipped).resolve())]}))
    said = subprocess.run(["promtool", "check", "config", str(local)], capture_output=True, text=True, timeout=60)
    assert said.returncode == 0, said.stdout + said.stderr
    said = subprocess.run(["amtool", "check-config", str(COMPOSE / "alertmanager.yml")], capture_output=True,
                          text=True, timeout=60)
    assert said.returncode == 0, said.stdout + said.stderr


def test_grafana_is_provisioned_with_prometheus_and_the_shipped_dashboard(stack):
    grafana = stack["services"]["grafana"]
    mounts = {target: source for source, target, *_ in (m.split(":") for m in grafana["volumes"])}
    provisioning = COMPOSE / mounts["/etc/grafana/provisioning"]
    [datasource] = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())["datasources"]
    assert datasource["url"].split("//")[1].split(":")[0] in stack["services"]
    [provider] = yaml.safe_load((provisioning / "dashboards" / "jetwatch.yaml").read_text())["providers"]
    dashboards = COMPOSE / mounts[provider["options"]["path"]]
    assert (dashboards / "jetwatch.json").exists(), "the provisioned folder holds the shipped dashboard"
