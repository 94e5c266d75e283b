"""`jetwatch pipeline run`: export from the store, run the Spark job with spark-submit, load back.

The job runs in its own process through `spark-submit`, exactly as it would on a cluster; the
master comes from `--master` (default local[*]), never from the job's code.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path
from typing import IO

import pandas as pd

from jetwatch import sql
from jetwatch.core.clock import rfc3339
from jetwatch.core.errors import JetwatchError, UsageError, require
from jetwatch.core.settings import Settings, parse_instant
from jetwatch.health.rules import Thresholds
from jetwatch.pipeline.export import export, prune_archive
from jetwatch.pipeline.load import load
from jetwatch.store.clusters import duplicates, identity, store_paths
from jetwatch.store.database import Store

JOB = Path(__file__).resolve().parent / "job.py"

# Small enough to share two cores with the collector and the dashboard.
SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


class PipelineError(JetwatchError):
    """The Spark side could not run or failed; the message says why and where to look."""


class Interrupted(BaseException):
    """SIGTERM or SIGINT arrived during a run (a BaseException, so no `except Exception` eats it)."""


# How long Spark gets to stop after SIGTERM before it is killed.
SPARK_STOP_GRACE = 10.0


def interrupt_on_signals() -> None:
    """Turn the first SIGTERM/SIGINT into `Interrupted` (so the run is recorded as such and Spark is
    stopped) and ignore the ones after it, which must not cut short the recording."""
    def handler(signum: int, frame: object) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        raise Interrupted(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handler)


def run_spark(cmd: list[str], env: dict[str, str], out: int | IO[bytes], nice: int) -> subprocess.CompletedProcess[bytes]:
    """spark-submit in a process group of its own, `nice` added to its niceness, waited for;
    interrupted, the whole group gets SIGTERM, then SIGKILL after SPARK_STOP_GRACE (Spark's Python
    workers follow their JVM)."""
    proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            process_group=0, preexec_fn=lambda: os.nice(nice))
    try:
        stdout, _ = proc.communicate()
    except BaseException:
        _stop_group(proc)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout)


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait in ((signal.SIGTERM, SPARK_STOP_GRACE), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def spark_submit() -> str:
    beside = Path(sys.executable).parent / "spark-submit"
    found = str(beside) if beside.exists() else shutil.which("spark-submit")
    if not found:
        raise PipelineError("spark-submit not found: install pyspark (it comes with jetwatch) in this environment")
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        raise PipelineError("Java was not found: Spark needs a Java 17 runtime (apt-get install -y openjdk-17-jre-headless)")
    return found


# What pipeline/job.py imports, directly or not: shipped to executors as one zip.
JOB_PACKAGES = ("jetwatch", "jetwatch.core", "jetwatch.sql", "jetwatch.health", "jetwatch.pipeline")


def code_zip(path: Path) -> Path:
    """The packages the job imports, laid out as `jetwatch/...`, for executors (`--py-files`)."""
    with zipfile.ZipFile(path, "w") as z:
        for name in JOB_PACKAGES:
            spec = importlib.util.find_spec(name)
            assert spec is not None and spec.submodule_search_locations, name
            base = Path(list(spec.submodule_search_locations)[0])
            arc = Path(*name.split("."))
            found = [base / "__init__.py"] if name == "jetwatch" else base.rglob("*")
            for f in found:
                if f.suffix in (".py", ".sql") and f.is_file():
                    z.write(f, arc / f.relative_to(base))
    return path


def _when(text: str | None, now: dt.datetime, default: dt.datetime) -> dt.datetime:
    return parse_instant(text, now, backwards=True) if text else default


def submit_command(settings: Settings, samples: Path, run_input: Path, output: Path, py_files: Path,
                   since: dt.datetime, until: dt.datetime) -> list[str]:
    cmd = [spark_submit(), "--master", settings.spark_master or "local[*]", "--py-files", str(py_files)]
    for k, v in SPARK_CONF.items():
        cmd += ["--conf", f"{k}={v}"]
    return cmd + [
        str(JOB), "--samples", samples.resolve().as_uri(), "--input", run_input.resolve().as_uri(),
        "--output", output.resolve().as_uri(), "--since", rfc3339(since), "--until", rfc3339(until),
        "--thresholds", json.dumps(Thresholds.from_settings(settings).as_dict()),
    ]


def fleet(settings: Settings) -> list[tuple[str, Store]]:
    """(cluster, store) of every store the run covers (--dbs, else --db) that exists."""
    pairs = []
    for path in store_paths(settings.dbs, settings.db):
        if path.exists():
            store = Store(path, lock_timeout=settings.lock_timeout)
            pairs.append((identity(store).cluster, store))
    twice = duplicates([(c, str(s.path)) for c, s in pairs])
    if twice:
        raise UsageError(twice)
    return pairs


def run(settings: Settings, since: dt.datetime, until: dt.datetime, log: Path | None = None) -> dict[str, int]:
    """One run over every store of the fleet: one export (each row with its cluster), one Spark job,
    and each cluster's results loaded back into its own store. Each store records the run."""
    pairs = fleet(settings)
    if not pairs:  # no store yet: the run makes --db's (and records itself there)
        store = Store(settings.db, lock_timeout=settings.lock_timeout)
        store.migrate()
        pairs = [(identity(store).cluster, store)]
    since = since.replace(minute=0, second=0, microsecond=0)  # whole hours: partitions are replaced whole
    base = Path(settings.data_dir) / "pipeline"
    run_id = uuid.uuid4().hex[:12]
    run_dir = base / "runs" / run_id
    started = dt.datetime.now(dt.UTC)
    record = {"run_id": run_id, "started_at": started, "finished_at": None, "since": since, "until": until,
              "outcome": "running", "rows_in": None, "message": None}

    def note() -> None:
        for _, store in pairs:
            store.write(lambda con: con.execute(sql.query("upsert_pipeline_run"), record))

    note()
    try:
        # The archive keeps raw retention's worth of hours, and always this run's window (re-exported below).
        prune_archive(base / "archive", min(since, until - dt.timedelta(seconds=settings.raw_retention)))
        rows_in = export(pairs, base / "archive", run_dir / "input", since, until)
        record["rows_in"] = rows_in
        cmd = submit_command(settings, base / "archive" / "samples", run_dir / "input", run_dir / "output",
                             code_zip(run_dir / "jetwatch-pipeline.zip"), since, until)
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        if log:
            with open(log, "ab") as out:
                proc = run_spark(cmd, env, out, settings.spark_nice)
        else:
            proc = run_spark(cmd, env, subprocess.PIPE, settings.spark_nice)
        if proc.returncode != 0:
            tail = (proc.stdout or b"").decode(errors="replace")[-3000:] if not log else f"see {log}"
            raise PipelineError(f"the Spark job failed with status {proc.returncode}: {tail}")
        retention = {"samples": until - dt.timedelta(seconds=settings.raw_retention),
                     "events": until - dt.timedelta(seconds=settings.event_retention)}
        loaded: dict[str, int] = {}
        for cluster, store in pairs:
            for k, v in load(store, run_dir / "output", since, until, retention, cluster).items():
                loaded[k] = loaded.get(k, 0) + v
        record.update(outcome="ok", message=", ".join(f"{k} {v}" for k, v in loaded.items()))
        return {"rows_in": rows_in, **loaded}
    except Interrupted as exc:
        record.update(outcome="interrupted", message=f"stopped by {exc} before it finished")
        raise
    except Exception as exc:
        record.update(outcome="failed", message=str(exc)[:4000])
        raise
    finally:
        record["finished_at"] = dt.datetime.now(dt.UTC)
        note()
        shutil.rmtree(run_dir, ignore_errors=True)


DEFAULT_WINDOW = dt.timedelta(hours=2)


def default_since(store: Store, until: dt.datetime, raw_retention_s: float) -> dt.datetime:
    """The last two hours, or from where the last successful run ended if that is earlier: after
    a pipeline outage the next run rolls up the hours it missed (their raw samples wait for it,
    retention keeps what no rollup covers), back to at most the raw retention."""
    since = until - DEFAULT_WINDOW
    frame = store.query("pipeline_caught_up_to")
    last = frame["until_ts"].iloc[0] if not frame.empty else None
    if last is not None and not pd.isna(last):
        since = min(since, pd.Timestamp(last).to_pydatetime())
    return max(since, until - dt.timedelta(seconds=raw_retention_s))


def run_pipeline(args: argparse.Namespace, settings: Settings) -> int:
    require("pyspark", "pipeline", "the pipeline")
    now = dt.datetime.now(dt.UTC)
    until = _when(args.until, now, now)
    pairs = fleet(settings)
    if not pairs:
        where = ", ".join(settings.dbs) or settings.db
        raise UsageError(f"no store at {where}: run the collector first (jetwatch collect or jetwatch up)")
    since = (_when(args.since, now, until) if args.since else
             min(default_since(store, until, settings.raw_retention) for _, store in pairs))
    if since >= until:
        raise UsageError("--since must be before --until")
    interrupt_on_signals()
    try:
        result = run(settings, since, until)
    except Interrupted as exc:
        print(f"pipeline: interrupted by {exc}; the run is recorded as interrupted", file=sys.stderr)
        return 130
    print("pipeline: " + ", ".join(f"{k} {v}" for k, v in result.items()))
    return 0
