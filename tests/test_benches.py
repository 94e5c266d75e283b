"""Every benchmark runs end to end at a small size, so none of them rots between the runs that
write docs/benchmarks.md: each prints its machine header and compares its own path with a
baseline that did the same work (and says whether the outputs agree where it checks them).

Smoke runs of the benches, not tests of jetwatch: `make test-heavy` runs them, `make test` does
not. Each bench runs once; the benches with checks of their own are left out of the loop."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import clean_env

ROOT = Path(__file__).resolve().parents[1]
SMALL = {
    "collect": ["--consumers", "200", "--streams", "4", "--rounds", "2"],
    "lag": ["--consumers", "200", "--streams", "4", "--busy-streams", "2", "--rounds", "2"],
    "store_writes": ["--rows", "20000", "--batch-rows", "10000", "--baseline-rows", "200", "--small-writes", "10"],
    "fleet": ["--rows", "20000", "--consumers", "200", "--runs", "3"],
    "verdicts": ["--rows", "20000", "--consumers", "200", "--runs", "3"],
    "pipeline": ["--rows", "20000", "--consumers", "50"],
    "scale": ["--consumers", "300", "--streams", "10", "--cycles", "2", "--interval", "0"],
    "consumer_page": ["--rows", "20000", "--consumers", "500", "--runs", "3", "--seal-every", "60"],
    "fleet_page": ["--rows", "20000", "--consumers", "500", "--runs", "3"],
    "fleet_clusters": ["--rows", "20000", "--consumers", "200", "--runs", "3"],
    "pages": ["--consumers", "500", "--cycles", "20", "--runs", "3"],
    "cli": ["--consumers", "200", "--runs", "2"],
}


pytestmark = pytest.mark.heavy
CHECKED = {"pipeline", "scale", "store_writes", "fleet"}  # each has a test of its own below


def run_bench(name: str) -> str:
    """The bench's output, once it ran to the end and printed its machine header and a ratio."""
    out = subprocess.run([sys.executable, "-m", f"bench.{name}", *SMALL[name]], cwd=ROOT, env=clean_env(),
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    text = out.stdout
    if name != "pipeline":
        assert text.startswith("machine: ") and "nats-server" in text.splitlines()[0]
        assert "ratio" in text
    return text


@pytest.mark.parametrize("name", [n for n in SMALL if n not in CHECKED])
def test_each_bench_runs_small_and_prints_its_machine_and_a_ratio(name):
    run_bench(name)


def test_the_scale_bench_reports_every_part_of_a_cycle_cpu_and_peak_rss():
    text = run_bench("scale")
    cycle = next(line for line in text.splitlines() if line.startswith("per cycle"))
    assert all(f"{part} " in cycle for part in ("fetch", "parse", "store", "judge", "total"))
    assert "of one core at a 10s interval; peak RSS" in text


def test_the_store_writes_bench_checks_every_store_it_times_holds_the_same_rows():
    text = run_bench("store_writes")
    assert "samples equal the ceiling's: True; its consumer_current equals the last batch: True" in text
    assert "both files hold every row: True" in text


def test_the_fleet_bench_baseline_recomputes_the_same_verdicts():
    text = run_bench("fleet")
    line = next(line for line in text.splitlines() if line.startswith("baseline"))
    assert "the same verdict for 200 of 200 consumers" in line


@pytest.mark.spark
def test_the_pipeline_bench_duckdb_side_does_the_same_rollup_as_spark():
    text = run_bench("pipeline")
    assert next(line for line in text.splitlines() if line.startswith("same output")).endswith(": equal")
