"""The cluster incidents as a detector: how long after its signal each is named, on a real
three-node cluster, the collector on its default settings, in both sampling modes; beside them the
look-alikes (rolling restart, lame duck, a slow follower, mirrors and sources), which must raise
no red verdict.

The scenarios are the suite's own cluster tests (tests/test_cluster_failures.py,
tests/test_cluster_partition.py, tests/test_server_made_consumers.py): this runs them with
`--named-log`, under which each notes the seconds from its signal (SIGKILL, SIGTERM, SIGSTOP, the
partition) to its verdict, and prints them with each test's outcome. Minutes long.

    python -m bench.cluster_incidents [--hold 30]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from bench.machine import print_header

ROOT = Path(__file__).resolve().parent.parent
FILES = ("tests/test_cluster_failures.py", "tests/test_cluster_partition.py", "tests/test_server_made_consumers.py")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hold", type=float, default=30.0, help="seconds each incident must stay named")
    args = parser.parse_args()
    print_header()
    with tempfile.TemporaryDirectory() as tmp:
        named, junit = Path(tmp) / "named.jsonl", Path(tmp) / "junit.xml"
        began = time.perf_counter()
        ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-n", "2", "--dist",
                              "loadgroup", "--named-log", str(named), "--cluster-hold", str(args.hold),
                              "--timeout", "1200", f"--junitxml={junit}", *FILES], cwd=ROOT, capture_output=True,
                             text=True)
        took = time.perf_counter() - began
        lines = [json.loads(line) for line in named.read_text().splitlines()] if named.exists() else []
        outcomes = _outcomes(junit)
    print("\n| incident | named after its signal | deadline | in time |\n|---|---|---|---|")
    for said in sorted(lines, key=lambda s: s["scenario"]):
        seconds = said["seconds"]
        after = "not named" if seconds is None else f"{seconds:.1f} s"
        ok = seconds is not None and seconds <= said["deadline"]
        print(f"| {said['scenario']} | {after} | {said['deadline']:.0f} s | {'yes' if ok else 'NO'} |")
    print("\n| test (incidents and look-alikes) | outcome |\n|---|---|")
    for name, outcome in sorted(outcomes.items()):
        print(f"| {name} | {outcome} |")
    print(f"\n{len(lines)} incident times, {sum(o == 'passed' for o in outcomes.values())} of {len(outcomes)} tests "
          f"passed, in {took / 60:.1f} min (pytest exit {ran.returncode})")
    if ran.returncode != 0:
        print(ran.stdout[-4000:])


def _outcomes(junit: Path) -> dict[str, str]:
    """Each test's outcome, from pytest's JUnit XML report."""
    if not junit.exists():
        return {}
    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        found[case.get("name", "?")] = ("failed" if kinds & {"failure", "error"} else
                                        "skipped" if "skipped" in kinds else "passed")
    return found


if __name__ == "__main__":
    main()
