"""The Kubernetes manifests as a cluster would take them: every overlay rendered by Kustomize (the
static kubectl from PyPI, offline), every object valid against the API schemas of a named
Kubernetes version, strictly (an unknown field fails), the Prometheus Operator's objects against
their CRD schemas (npm's @kubernetes-models, `make deploy-deps`), and a kind with no schema is a
failure, never skipped. Then the wiring: what each object names exists and matches."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from jetwatch.exporters.metrics_server import parse_address
from tests.helpers import known_variables

ROOT = Path(__file__).resolve().parent.parent
KUBERNETES = ROOT / "deploy" / "kubernetes"
OVERLAYS = sorted(p.name for p in (KUBERNETES / "overlays").iterdir() if p.is_dir())
KUBECTL = Path(sys.executable).parent / "kubectl"
VALIDATOR = KUBERNETES / "validate"
# The oldest Kubernetes the manifests are written for, and the newest the schemas know.
VERSIONS = ("1.31.0", "1.37.0")
CRDS = ("monitoring.coreos.com/",)


def render(overlay: str) -> list[dict[str, Any]]:
    done = subprocess.run([str(KUBECTL), "kustomize", str(KUBERNETES / "overlays" / overlay)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [o for o in yaml.safe_load_all(done.stdout) if o]


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request) -> tuple[str, list[dict[str, Any]]]:
    return request.param, render(request.param)


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def test_the_overlays_are_one_cluster_several_clusters_and_with_the_pipeline():
    assert OVERLAYS == ["one-cluster", "several-clusters", "with-pipeline"]


@pytest.mark.parametrize("version", VERSIONS)
def test_every_core_object_is_valid_against_the_kubernetes_api_strictly(rendered, version):
    overlay, objects = rendered
    core = [o for o in objects if not o["apiVersion"].startswith(CRDS)]
    assert core
    for o in core:
        try:
            kubernetes_validate.validate(o, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise AssertionError(f"{overlay}: {o['kind']} {o['metadata']['name']}: {exc.message} at "
                                 f"{'/'.join(map(str, exc.path))}") from None


def test_every_prometheus_operator_object_is_valid_against_its_crd_schema(rendered):
    overlay, objects = rendered
    crs = [o for o in objects if o["apiVersion"].startswith(CRDS)]
    assert {o["kind"] for o in crs} == {"PodMonitor", "PrometheusRule"}, overlay
    said = _crd_check(crs)
    assert said.returncode == 0, f"{overlay}: {said.stdout}{said.stderr}"


def test_a_kind_without_a_schema_fails_rather_than_passing_unchecked():
    alien = {"apiVersion": "monitoring.coreos.com/v1", "kind": "Probe", "metadata": {"name": "x"}, "spec": {}}
    said = _crd_check([alien])
    assert said.returncode == 1 and "no schema for monitoring.coreos.com/v1/Probe" in said.stdout
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        kubernetes_validate.validate({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "x"}},
                                     VERSIONS[0], strict=True)


def test_a_wrong_field_fails_each_validator():
    """Both validators fail what they should (else a passing run would prove nothing)."""
    statefulset = of_kind(render("one-cluster"), "StatefulSet")[0]
    statefulset["spec"]["template"]["spec"]["containers"][0]["livenessProb"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(statefulset, VERSIONS[0], strict=True)
    monitor = of_kind(render("one-cluster"), "PodMonitor")[0]
    monitor["spec"]["podMetricsEndpoints"][0]["interval"] = "30 seconds"
    assert _crd_check([monitor]).returncode == 1


def _crd_check(objects: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    if not (VALIDATOR / "node_modules").exists():
        pytest.fail("the CRD schemas are not installed: run `make deploy-deps` (`make test` does)")
    return subprocess.run(["node", "validate.mjs"], cwd=VALIDATOR, input=json.dumps(objects),
                          capture_output=True, text=True, timeout=60)


def _pods(objects: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
    """(pod spec, owner name) of every StatefulSet and CronJob."""
    found = [(s["spec"]["template"]["spec"], s["metadata"]["name"]) for s in of_kind(objects, "StatefulSet")]
    found += [(j["spec"]["jobTemplate"]["spec"]["template"]["spec"], j["metadata"]["name"])
              for j in of_kind(objects, "CronJob")]
    return found


def test_everything_an_object_names_exists(rendered):
    overlay, objects = rendered
    names = {(o["kind"], o["metadata"]["name"]) for o in objects}
    for pod, owner in _pods(objects):
        for c in pod["containers"]:
            for ref in c.get("envFrom", []):
                assert ("ConfigMap", ref["configMapRef"]["name"]) in names, (overlay, owner, ref)
        for v in pod.get("volumes", []):
            if "secret" in v and not v["secret"].get("optional"):
                assert ("Secret", v["secret"]["secretName"]) in names, (overlay, owner, v)
            if "configMap" in v:
                assert ("ConfigMap", v["configMap"]["name"]) in names, (overlay, owner, v)
    statefulsets = of_kind(objects, "StatefulSet")
    for s in statefulsets:
        assert ("Service", s["spec"]["serviceName"]) in names, (overlay, s["metadata"]["name"])
    for job in of_kind(objects, "CronJob"):
        for v in job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"]:
            if "persistentVolumeClaim" in v:  # the StatefulSet's claim of its one pod
                claims = {f"{t['metadata']['name']}-{s['metadata']['name']}-0"
                          for s in statefulsets for t in s["spec"]["volumeClaimTemplates"]}
                assert v["persistentVolumeClaim"]["claimName"] in claims, (overlay, v)
    for ingress in of_kind(objects, "Ingress"):
        for rule in ingress["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                service = path["backend"]["service"]
                assert ("Service", service["name"]) in names, (overlay, service)


def test_ports_and_probes_match_the_settings_they_serve(rendered):
    overlay, objects = rendered
    settings = {m["metadata"]["name"]: m["data"] for m in of_kind(objects, "ConfigMap")}
    for s in of_kind(objects, "StatefulSet"):
        pod = s["spec"]["template"]["spec"]
        containers = {c["name"]: c for c in pod["containers"]}
        env = settings[containers["collector"]["envFrom"][0]["configMapRef"]["name"]]
        ports = {p["name"]: p["containerPort"] for c in pod["containers"] for p in c["ports"]}
        assert ports["metrics"] == parse_address(env["JETWATCH_METRICS_ADDRESS"])[1]
        assert parse_address(env["JETWATCH_METRICS_ADDRESS"])[0] == "0.0.0.0"  # scraped from outside the pod
        assert ports["dashboard"] == int(env["JETWATCH_PORT"]) and env["JETWATCH_ADDRESS"] == "0.0.0.0"
        collector = containers["collector"]
        assert collector["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert collector["startupProbe"]["httpGet"]["path"] == "/healthz"
        # The pod's readiness routes the dashboard: the collector waiting for NATS must not take it away.
        assert "readinessProbe" not in collector and "readinessProbe" in containers["dashboard"]
        for c in pod["containers"]:
            for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                if probe in c:
                    assert c[probe]["httpGet"]["port"] in {p["name"] for p in c["ports"]}, (overlay, c["name"], probe)
            assert c["securityContext"]["readOnlyRootFilesystem"] is True
            assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
            assert c["resources"]["requests"]["memory"] and c["resources"]["limits"]["memory"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert "JETWATCH_PASSWORD" not in env and not any("creds" in a for c in pod["containers"]
                                                           for a in c.get("args", []) + c["command"])
    for service in of_kind(objects, "Service"):
        targets = {p["targetPort"] for p in service["spec"]["ports"]}
        assert targets <= {"metrics", "dashboard"}, (overlay, service)


def test_every_variable_the_manifests_set_is_one_jetwatch_reads(rendered):
    overlay, objects = rendered
    named = {k for m in of_kind(objects, "ConfigMap") for k in m["data"]}
    named |= {e["name"] for pod, _ in _pods(objects) for c in pod["containers"] for e in c.get("env", [])}
    assert {n for n in named if n.startswith("JETWATCH_")} - known_variables() == set(), overlay


def test_each_cluster_is_scraped_once_by_its_own_pod_monitor(rendered):
    overlay, objects = rendered
    pods = {s["metadata"]["name"]: s["spec"]["template"]["metadata"]["labels"] for s in of_kind(objects, "StatefulSet")}
    for monitor in of_kind(objects, "PodMonitor"):
        wanted = monitor["spec"]["selector"]["matchLabels"]
        selected = [name for name, labels in pods.items() if wanted.items() <= labels.items()]
        assert len(selected) == 1, (overlay, monitor["metadata"]["name"], selected)
    assert len(of_kind(objects, "PodMonitor")) == len(pods)
    assert len(of_kind(objects, "PrometheusRule")) == 1, overlay  # the alerts once, however many clusters


def test_the_prometheus_rule_holds_exactly_the_shipped_rules_file(rendered):
    overlay, objects = rendered
    [rule] = of_kind(objects, "PrometheusRule")
    shipped = yaml.safe_load((ROOT / "deploy" / "prometheus" / "jetwatch-rules.yml").read_text())
    assert rule["spec"]["groups"] == shipped["groups"], overlay
    fresh = subprocess.run([sys.executable, str(KUBERNETES / "prometheusrule.py"), "--check"], timeout=60)
    assert fresh.returncode == 0, "deploy/kubernetes/rules/prometheusrule.yaml is stale: run deploy/kubernetes/prometheusrule.py"
