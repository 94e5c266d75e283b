"""Write the PrometheusRule of the Kubernetes base from deploy/prometheus/jetwatch-rules.yml, so
the rules have one source: `python deploy/kubernetes/prometheusrule.py` rewrites
deploy/kubernetes/rules/prometheusrule.yaml (tests/test_kubernetes.py fails when it is stale)."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
RULES = HERE.parent / "prometheus" / "jetwatch-rules.yml"
TARGET = HERE / "rules" / "prometheusrule.yaml"
HEADER = ("# Made by deploy/kubernetes/prometheusrule.py from deploy/prometheus/jetwatch-rules.yml: edit that\n"
          "# file and run the script, never this one.\n")


def render() -> str:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    rule = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": "jetwatch"}, "spec": {"groups": groups}}
    return HEADER + yaml.safe_dump(rule, sort_keys=False, allow_unicode=True, width=120)


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        sys.exit(0 if TARGET.read_text() == render() else 1)
    TARGET.write_text(render())
