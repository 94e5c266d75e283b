"""The pipeline end to end: spark-submit as a subprocess, on a store the collector filled from a
real server, then the dashboard's Pins page reading what it made."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from jetwatch.core.embedded_server import free_port
from jetwatch.store.database import Store
from tests.conftest import CONSUMER, IDLE_STREAM, STREAM
from tests.helpers import clean_env, rows, wait_until
from tests.test_dashboard import APP, consumers, frame

# One worker runs this module, so its tests share one first run of the job (`first_run`).
pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("pipeline_e2e")]

SESSIONS = "SELECT pinned_id, start_ts, end_ts, end_reason FROM pin_sessions WHERE stream = ? ORDER BY start_ts"
OUTPUTS = ("pin_sessions", "rollups", "verdict_history")


def pipeline(db: str, data: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """`jetwatch pipeline run` at the niceness of the suite's other processes (`--spark-nice 0`):
    niced, a run waits minutes for a core beside the tests of a loaded machine (the default's
    niceness is checked in test_up.py)."""
    return subprocess.run([sys.executable, "-m", "jetwatch.cli", "pipeline", "run", "--db", db, "--data-dir", str(data),
                           "--since", "2h", "--health-min-span", "1s", "--spark-nice", "0", *extra],
                          capture_output=True, text=True, env=clean_env(), timeout=600)


def outputs(db: str) -> dict[str, list[tuple]]:
    store = Store(db)
    return {t: rows(store, f"SELECT * FROM {t} ORDER BY ALL") for t in OUTPUTS}


@dataclass
class FirstRun:
    db: str
    data: Path
    until: str
    done: subprocess.CompletedProcess[str]
    outputs: dict[str, list[tuple]]


@pytest.fixture(scope="module")
def first_run(filled_db, tmp_path_factory) -> FirstRun:
    """spark-submit once on a copy of the collector-filled store; --until pinned so that a rerun
    sees exactly the same input."""
    tmp = tmp_path_factory.mktemp("e2e")
    db = str(tmp / "jetwatch.duckdb")
    shutil.copy(filled_db, db)
    # Past the last sample and the last pin event: the collector can stop with the story's last
    # advisories stored after its last sample, and an --until before them would drop their sessions.
    until = rows(Store(db), "SELECT strftime(greatest((SELECT max(ts) FROM samples), (SELECT max(ts) FROM advisories)) "
                            "+ INTERVAL 1 SECOND, '%Y-%m-%dT%H:%M:%SZ')")[0][0]
    done = pipeline(db, tmp / "data", "--until", until, "--master", "local[2]")
    return FirstRun(db, tmp / "data", until, done, outputs(db) if done.returncode == 0 else {})


@pytest.fixture
def store_copy(filled_db, tmp_path) -> str:
    db = str(tmp_path / "jetwatch.duckdb")
    shutil.copy(filled_db, db)
    return db


@pytest.mark.timeout(900)  # a Spark run: minutes on a loaded 2-core machine
def test_spark_submit_local_job_makes_sessions_rollups_and_verdicts_that_the_pins_page_shows(first_run, monkeypatch):
    done, data = first_run.done, first_run.data
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"pipeline: rows_in \d+, pin_sessions \d+, rollups \d+, verdicts \d+", done.stdout)
    store = Store(first_run.db)
    sessions = rows(store, SESSIONS, [STREAM])
    assert [s[3] for s in sessions] == ["timeout", "admin", "still pinned"]
    assert rows(store, "SELECT count(*) FROM rollups WHERE stream = ? AND granularity = '1m'", [STREAM])[0][0] >= 1
    assert rows(store, "SELECT count(*) FROM rollups WHERE stream = ? AND granularity = '1h'", [STREAM])[0][0] >= 1
    assert rows(store, "SELECT count(*) FROM verdict_history WHERE stream = ?", [STREAM])[0][0] >= 1
    # The idle consumer's work only ages: each hour keeps the largest age its samples had.
    [(rolled, raw)] = rows(store, "SELECT (SELECT max(oldest_unacked_age_max_seconds) FROM rollups WHERE stream = ? "
                                  "AND granularity = '1h'), (SELECT max(oldest_unacked_age_seconds) FROM samples "
                                  "WHERE stream = ?)", [IDLE_STREAM, IDLE_STREAM])
    assert raw > 0 and rolled == pytest.approx(raw)
    assert rows(store, "SELECT outcome FROM pipeline_runs") == [("ok",)]
    archive = list((data / "pipeline" / "archive" / "samples").glob("date=*/hour=*/cluster=*/*.parquet"))
    assert archive, "samples archived as Parquet partitioned by date, hour and cluster"

    monkeypatch.setenv("JETWATCH_DB", first_run.db)
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("views/pins.py").run()
    assert not at.exception
    assert any(c.value.startswith("Sessions from pipeline pin_sessions") for c in at.caption)
    summary = frame(at, "Switches per hour")
    assert summary[consumers(summary) == CONSUMER].iloc[0]["Median pin"] != ""  # a duration in words


@pytest.mark.timeout(900)  # Spark runs: minutes on a loaded 2-core machine
def test_a_rerun_gives_the_same_output_and_a_failed_run_keeps_the_previous(first_run, tmp_path):
    """On a copy of the first run's store and data: a second run over the same input, then one
    that fails after its export."""
    assert first_run.done.returncode == 0, first_run.done.stdout + first_run.done.stderr
    db, data = str(tmp_path / "jetwatch.duckdb"), tmp_path / "data"
    shutil.copy(first_run.db, db)
    shutil.copytree(first_run.data, data)
    second = pipeline(db, data, "--until", first_run.until, "--master", "local[2]")
    assert second.returncode == 0, second.stdout + second.stderr
    assert outputs(db) == first_run.outputs

    broken = pipeline(db, data, "--until", first_run.until, "--master", "no-such-master")  # fails after the export
    assert broken.returncode != 0
    assert "the Spark job failed" in broken.stderr
    assert outputs(db) == first_run.outputs
    assert [r[0] for r in rows(Store(db), "SELECT outcome FROM pipeline_runs ORDER BY started_at")] == ["ok", "ok", "failed"]


@pytest.mark.heavy  # three minutes of a master and a worker JVM: `make test-heavy`
@pytest.mark.timeout(900)  # several Spark runs: minutes on a loaded 2-core machine
def test_the_same_job_runs_on_a_standalone_spark_master(store_copy, tmp_path):
    spark_class = str(Path(sys.executable).parent / "spark-class")
    port = free_port()
    env = {**os.environ, "SPARK_LOG_DIR": str(tmp_path / "logs"), "SPARK_WORKER_DIR": str(tmp_path / "work"),
           "PYSPARK_PYTHON": sys.executable}
    master_log, worker_log = tmp_path / "master.log", tmp_path / "worker.log"
    master = subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(free_port())], env=env,
                              stdout=open(master_log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)  # noqa: SIM115 (the child's)
    worker = None
    try:
        wait_until(lambda: "I have been elected leader" in master_log.read_text(errors="replace"), timeout=90,
                   message="the standalone master")
        worker = subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                                   "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                                   "--webui-port", str(free_port())], env=env,
                                  stdout=open(worker_log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)  # noqa: SIM115 (the child's)
        wait_until(lambda: "Successfully registered with master" in worker_log.read_text(errors="replace"),
                   timeout=90, message="a worker registered")
        done = pipeline(store_copy, tmp_path / "data", "--master", f"spark://127.0.0.1:{port}")
        assert done.returncode == 0, done.stdout + done.stderr
        assert [s[3] for s in rows(Store(store_copy), SESSIONS, [STREAM])] == ["timeout", "admin", "still pinned"]
    finally:
        for proc in (worker, master):
            if proc is not None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(30)
