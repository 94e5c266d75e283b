"""`jetwatch up` with no server: the embedded demo, seen through the dashboard, then stopped clean."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import streamlit as st
from playwright.sync_api import sync_playwright
from streamlit.testing.v1 import AppTest

from jetwatch.actions.drains import spawn_detached
from jetwatch.actions.operations import DrainPlan, Target
from jetwatch.core.embedded_server import free_port
from jetwatch.core.processes import marked, new_tree_token
from jetwatch.core.settings import Settings
from jetwatch.demo.script import SCRIPT
from jetwatch.demo.workload import CONSUMERS
from jetwatch.store.database import Store
from tests.browser import http_ok, launch_chromium, shoot
from tests.helpers import clean_env, rows, wait_until
from tests.test_dashboard import APP, consumers, frame

pytestmark = pytest.mark.browser

DEMO_CONSUMERS = {"fulfilment", "billing", "archive", "audit-log", "analytics", "notify"}


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for_the_unpins(store: Store) -> None:
    """Until the demo's timeout unpin and admin unpin are stored (its script makes them some 23 s in)."""
    wait_until(lambda: store.exists() and set(store.query("pin_events_range", {
        "since": "2000-01-01", "until": "2100-01-01", "account": None, "stream": None, "consumer": None}).query("event == 'unpinned'")["reason"]) >= {"timeout", "admin"},
        timeout=120, message="the demo's timeout unpin and admin unpin")


@contextlib.contextmanager
def demo(tmp_path: Path, *flags: str, said: list[str] | None = None,
         unpinned: bool = True) -> Iterator[tuple[str, Store, list[int]]]:
    """`jetwatch up` with no server: the embedded demo, once its dashboard answers and (unless
    `unpinned` is False: then the caller waits, with wait_for_the_unpins) the demo's timeout unpin
    and admin unpin are stored. Stopped with Ctrl-C afterwards: it must exit 0, say so, and leave
    none of its children alive. `said` gets its output's lines as they come."""
    port = free_port()
    data = tmp_path / "data"
    proc = subprocess.Popen(
        [sys.executable, "-m", "jetwatch.cli", "up", "--data-dir", str(data), "--port", str(port),
         "--health-min-span", "5s", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=clean_env(), text=True)
    lines = said if said is not None else []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    children: list[int] = []
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until(lambda: http_ok(base + "/_stcore/health"), timeout=90, message="the dashboard")
        children = _children(proc.pid)
        assert len(children) >= 4, children  # nats-server, collector, demo, dashboard (and the pipeline's runs)
        store = Store(data / "jetwatch.duckdb")
        if unpinned:
            wait_for_the_unpins(store)
        yield base, store, children
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        reader.join(timeout=10)
    text = "".join(lines)
    assert proc.returncode == 0, text
    assert "stopped" in text
    assert [pid for pid in children if _alive(pid)] == [], text


def script_wraps_at_1280(browser: Any, base: str) -> None:
    """What the demo scripts, read at 1280 px: every line wraps in view, none is cut."""
    narrow = browser.new_page(viewport={"width": 1280, "height": 800})
    narrow.goto(base + "/")
    narrow.get_by_text("What this demo scripts").filter(visible=True).first.click()
    for d in SCRIPT:
        line = narrow.get_by_text(d.expect.split(";")[-1].strip()[-40:]).filter(visible=True).first
        line.wait_for(timeout=30_000)
        box = line.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 1280, (d.consumer, box)
    narrow.close()


def test_up_runs_the_demo_end_to_end_and_stops_everything(tmp_path, monkeypatch):
    """Without the pipeline: its first run would come a minute in, a Spark run that the tests of
    the pipeline already make; its runs under `up` are the Ctrl-C test's below, and the screenshot
    run (`make screenshots`) waits for one. The browser's pages need none of the demo's scripted
    unpins, so they are read while its script runs on to them (some 23 s in); the pages read in
    the test's process after, once both unpins are stored."""
    said: list[str] = []
    with demo(tmp_path, "--no-pipeline", said=said, unpinned=False) as (base, store, _):
        def told() -> list[re.Match[str]]:
            return [m for line in said if (m := re.search(r"demo operator: sign in on the dashboard as 'demo' "
                                                          r"with password (\S+) ", line))]
        password = wait_until(told, timeout=30, message="the demo operator's password said")[0].group(1)
        assert password not in (tmp_path / "data" / "demo-operators").read_text()  # only the hash is kept

        with sync_playwright() as p:
            browser = launch_chromium(p)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(base + "/")
            page.get_by_text("Data as of").filter(visible=True).first.wait_for(timeout=30_000)
            page.get_by_text("capture: durable stream").filter(visible=True).first.wait_for(timeout=30_000)
            # The demo says what it scripts, and its own operator can act on it.
            page.get_by_text("What this demo scripts").filter(visible=True).first.wait_for(timeout=30_000)
            page.get_by_label("Operator name").fill("demo")
            page.get_by_label("Password", exact=True).fill(password)
            page.get_by_role("button", name="Sign in").click()
            page.get_by_text("signed in as demo").filter(visible=True).first.wait_for(timeout=30_000)
            script_wraps_at_1280(browser, base)
            page.goto(base + "/pins")
            page.get_by_text("ORDERS / fulfilment [jobs]").filter(visible=True).first.wait_for(timeout=30_000)
            page.goto(base + "/consumer?stream=ORDERS&consumer=fulfilment")
            page.get_by_text("pending (not yet delivered)").filter(visible=True).first.wait_for(timeout=30_000)
            browser.close()

        wait_for_the_unpins(store)
        assert len(told()) == 1, said  # said once, all this while
        monkeypatch.setenv("JETWATCH_DB", str(store.path))
        monkeypatch.setenv("JETWATCH_HEALTH_MIN_SPAN", "5s")
        st.cache_data.clear()
        at = AppTest.from_file(APP, default_timeout=60).run()
        assert not at.exception
        fleet = frame(at, "Verdict")
        assert set(consumers(fleet)) >= DEMO_CONSUMERS
        assert (fleet["Verdict"] != "").all()
        at.switch_page("views/pins.py").run()
        events = frame(at, "Event")
        assert set(events[events["Event"] == "unpinned"]["Reason"]) >= {"timeout", "admin"}
        # The demo explains itself: its operator's unpin is on the Audit page as well as on Pins, and
        # its grouped workers announce their pins (no "unannounced" holder where a worker holds one).
        audit = rows(store, "SELECT actor, action, stream, consumer, outcome FROM audit WHERE phase = 'outcome'")
        assert ("demo-script", "unpin", "ORDERS", "fulfilment", "ok") in audit, audit
        holders = rows(store, "SELECT DISTINCT name FROM pin_holders WHERE stream = 'ORDERS' AND consumer = 'fulfilment'")
        assert {n for (n,) in holders} & {"demo-f1", "demo-f2", "demo-f3"}, holders


def test_the_demo_says_what_it_scripts_on_each_of_its_consumers():
    """Every consumer the demo makes has its script (what it does, what jetwatch should say), and
    nothing is scripted on a consumer the demo does not make."""
    made = {(stream, config["durable_name"]) for stream, config in CONSUMERS}
    assert {(d.stream, d.consumer) for d in SCRIPT} == made
    assert {c for _, c in made} == DEMO_CONSUMERS


@pytest.mark.screenshots
@pytest.mark.heavy  # a second demo, for the docs' pictures of the pages with pipeline results
def test_up_demo_screenshots_once_the_scheduled_pipeline_loaded_its_results(tmp_path):
    with demo(tmp_path, "--pipeline-every", "30s") as (base, store, _):
        # The scheduled pipeline (first run 30 s in) loads sessions and verdicts for the pages.
        wait_until(lambda: not (run := store.query("pipeline_last_run")).empty and run["outcome"][0] == "ok",
                   timeout=240, interval=1.0, message="a scheduled pipeline run, finished ok")
        assert rows(store, "SELECT count(*) FROM pin_sessions")[0][0] > 0
        assert rows(store, "SELECT count(*) FROM verdict_history")[0][0] > 0

        with sync_playwright() as p:
            browser = launch_chromium(p)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(base + "/")
            page.get_by_text("Data as of").filter(visible=True).first.wait_for(timeout=30_000)
            page.get_by_text("capture: durable stream").filter(visible=True).first.wait_for(timeout=30_000)
            shoot(page, "fleet.png")
            script_wraps_at_1280(browser, base)
            page.goto(base + "/pins")
            page.get_by_text("ORDERS / fulfilment [jobs]").filter(visible=True).first.wait_for(timeout=30_000)
            shoot(page, "pins.png")
            page.goto(base + "/consumer?stream=ORDERS&consumer=fulfilment")
            page.get_by_text("pending (not yet delivered)").filter(visible=True).first.wait_for(timeout=30_000)
            shoot(page, "consumer.png")
            browser.close()


def test_up_says_what_is_missing_and_runs_the_parts_that_can_run(tmp_path):
    import socket

    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "jetwatch.cli", "up", "--server", "nats://127.0.0.1:1", "--data-dir", str(tmp_path),
         "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**{k: v for k, v in clean_env().items() if k != "JAVA_HOME"},
             "PATH": str(tmp_path / "no-java-here")})  # everything jetwatch starts runs from its own Python
    lines: list[str] = []
    try:
        while not any("Ctrl-C stops everything" in line for line in lines):
            line = proc.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
        text = "".join(lines)
        assert "cannot reach NATS at nats://127.0.0.1:1: check the URL and that the server runs" in text
        assert f"no dashboard: port {port} on 127.0.0.1 is already in use" in text
        assert "no pipeline: Java was not found. Install a Java 17 runtime" in text
        wait_until(lambda: "could not connect to NATS" in (tmp_path / "logs" / "collector.log").read_text(),
                   timeout=30, message="the collector saying it waits for the server")
        assert proc.poll() is None
    finally:
        busy.close()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "stopped" in out


def _started_by(mark: str) -> list[str]:
    """Live processes carrying this test's own mark in their environment: their command lines."""
    found = []
    for pid in marked("JW_THIS_TEST", mark):
        try:
            found.append(f"{pid}: " + Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            pass  # ended meanwhile
    return found


def _niceness(pid: int) -> int | None:
    """A live process's niceness (None: it ended meanwhile)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])
    except OSError:
        return None


def test_ctrl_c_during_a_pipeline_run_stops_spark_and_every_child_and_records_the_run_interrupted(tmp_path):
    mark = new_tree_token()
    data = tmp_path / "data"
    proc = subprocess.Popen(
        [sys.executable, "-m", "jetwatch.cli", "up", "--data-dir", str(data), "--port", str(free_port()),
         "--pipeline-every", "2s"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=clean_env(JW_THIS_TEST=mark))
    try:
        # Spark's JVM and the job's Python driver both running: the middle of a pipeline run.
        wait_until(lambda: all(any(part in p for p in _started_by(mark)) for part in ("SparkSubmit", "job.py")),
                   timeout=120, interval=0.2, message="a scheduled pipeline run with Spark's JVM and job.py")
        # The job yields the cores to the collector and the dashboard beside it (--spark-nice, 5).
        spark = [int(p.split(":")[0]) for p in _started_by(mark) if "SparkSubmit" in p or "job.py" in p]
        assert {_niceness(pid) for pid in spark} - {None} == {5}
        store = Store(data / "jetwatch.duckdb")
        wait_until(lambda: rows(store, "SELECT count(*) FROM pipeline_runs WHERE outcome = 'running'")[0][0] == 1,
                   timeout=30, message="the run recorded as running")
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    text = out.decode()
    assert proc.returncode == 0, text
    assert "stopped" in text
    assert _started_by(mark) == [], text  # nothing outlives `up`: no JVM, no Python worker, no server
    assert rows(store, "SELECT count(*) FROM pipeline_runs WHERE finished_at IS NULL")[0][0] == 0
    last = store.query("pipeline_last_run").iloc[0]
    assert last["outcome"] == "interrupted", last
    assert "stopped by SIGTERM" in last["message"]


def test_sigterm_to_jetwatch_dashboard_stops_the_streamlit_server_it_runs(tmp_path):
    mark = new_tree_token()
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "jetwatch.cli", "dashboard", "--db", str(tmp_path / "j.duckdb"), "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, env=clean_env(JW_THIS_TEST=mark))
    try:
        wait_until(lambda: http_ok(f"http://127.0.0.1:{port}/_stcore/health"), timeout=60, message="the dashboard")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    wait_until(lambda: not _started_by(mark), timeout=10, message="the Streamlit server to end with its command")
    assert not http_ok(f"http://127.0.0.1:{port}/_stcore/health")


def test_a_detached_drain_that_ended_is_reaped_not_left_a_zombie(tmp_path, nats_server):
    settings = Settings({"server": nats_server.url, "db": str(tmp_path / "j.duckdb"), "lock_timeout": 30.0})
    before = set(_children(os.getpid()))
    # No such stream: the drain process says so and exits at once.
    spawn_detached(settings, Store(settings.db, lock_timeout=30), Target(None, "NO_SUCH_STREAM", "c"),
                   DrainPlan("resume", 5.0), "tester", tmp_path)
    drain = wait_until(lambda: set(_children(os.getpid())) - before, timeout=10, message="the drain process")
    (pid,) = drain
    wait_until(lambda: not _alive(pid), timeout=60, message="the drain to end")
    wait_until(lambda: not Path(f"/proc/{pid}").exists(), timeout=5,
               message=f"the ended drain {pid} to be reaped (not a zombie)")
