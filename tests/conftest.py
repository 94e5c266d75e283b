"""Fixtures start real services: a nats-server per test session, a DuckDB file per test."""

from __future__ import annotations

import asyncio
import functools
import itertools
import os
import signal
import time
from pathlib import Path

import nats
import pytest
from hypothesis import settings as hypothesis_settings

from jetwatch.core.embedded_server import NatsServer, ServerStartError, free_port, nats_server_binary
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.core.processes import describe, marked, new_tree_token
from jetwatch.store.database import Store
from tests.browser import CHROMIUM, launch_chromium
from tests.helpers import collecting, collector_settings, eventually, make_consumer, make_stream, publish, rows
from tests.scenario import pin_story

# The suite is a gate: the same generated examples every run, so a red build means the change, not
# the dice. `pytest --hypothesis-profile=explore` searches new examples (and keeps failures in
# .hypothesis/ to replay).
hypothesis_settings.register_profile("ci", derandomize=True, database=None)
hypothesis_settings.register_profile("explore", derandomize=False)
hypothesis_settings.load_profile("ci")

_counter = itertools.count()


# Every process the suite starts inherits this variable (tests build children's environments from
# os.environ), so the session's end can find any that outlived their test, however detached.
SESSION_MARK = "JW_TEST_SESSION"
LEFTOVER_GRACE = 15.0


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--screenshots", action="store_true",
                     help="write the docs' screenshots to docs/screenshots/ (`make screenshots`)")
    parser.addoption("--named-log", default=None,
                     help="append each cluster incident's time to be named to this file, a JSON line each "
                          "(`python -m bench.cluster_incidents` reads it)")
    parser.addoption("--cluster-hold", type=float, default=30.0,
                     help="seconds each cluster incident must stay named at every cycle (`make test-cluster`: 300)")


# The suite's JVMs (spark-submit's launcher and driver, the local SparkSession) live for seconds to a
# minute on small data: the optimising compiler and the parallel collector's threads spend more CPU
# than such a run gives back, on a machine whose cores the other tests wait for. Every JVM the tests
# start inherits these through the environment; the product's own runs (pipeline/cli.py SPARK_CONF)
# keep the JVM's defaults.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _scan_installed_components_once() -> None:
    """Every AppTest scans all installed distributions' metadata for Streamlit components on its
    first run (three quarters of a second of CPU, more than most pages take to run), and a test
    process runs hundreds of them over the same installed packages: the first scan's answer is
    kept for the rest of the process. The served dashboard scans once per server, as it does."""
    from streamlit.components.v2 import manifest_scanner

    manifest_scanner.scan_component_manifests = functools.cache(manifest_scanner.scan_component_manifests)


def pytest_configure(config: pytest.Config) -> None:
    _scan_installed_components_once()
    if config.getoption("screenshots"):
        os.environ["JW_SCREENSHOTS"] = "1"
    if config.getoption("named_log"):
        os.environ["JW_NAMED_LOG"] = str(Path(config.getoption("named_log")).resolve())
    if TEST_JVM_OPTIONS not in os.environ.get("JAVA_TOOL_OPTIONS", ""):
        os.environ["JAVA_TOOL_OPTIONS"] = f"{os.environ.get('JAVA_TOOL_OPTIONS', '')} {TEST_JVM_OPTIONS}".strip()


def pytest_report_header(config: pytest.Config) -> list[str]:
    """The browser the browser tests drive, said at the start of every run: a browser test that
    fails on one machine and passes on another is first a question of versions."""
    import importlib.metadata
    import subprocess

    try:
        said = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        said = f"not runnable at {CHROMIUM} ({exc})"
    return [f"browser: {said or 'no version said'}; playwright {importlib.metadata.version('playwright')}"]


def _xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_sessionstart(session: pytest.Session) -> None:
    # Under pytest-xdist the controller marks the session before it starts its workers (its own
    # sessionstart runs last): the workers, and everything they start, inherit the one mark, and
    # the controller looks for it once every worker has gone.
    if not _xdist_worker(session.config):
        os.environ[SESSION_MARK] = new_tree_token()
    try:
        nats_server_binary()
    except ServerStartError as exc:
        pytest.exit(str(exc), returncode=3)


def leftover_processes(grace: float = LEFTOVER_GRACE) -> list[int]:
    """Processes this session started that are still alive after `grace` seconds."""
    deadline = time.monotonic() + grace
    while (left := marked(SESSION_MARK, os.environ[SESSION_MARK])) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.hookimpl(trylast=True)  # under xdist: after the controller has stopped its workers
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if any process a test or fixture started outlives the suite (then kill it).
    A worker does not look: it would find the other workers, which carry the same mark."""
    if SESSION_MARK not in os.environ or _xdist_worker(session.config):
        return
    left = leftover_processes()
    if not left:
        return
    lines = "\n".join(f"  {describe(pid)}" for pid in left)
    print(f"\nFAILED: {len(left)} process(es) started by the test suite outlived it; killing them:\n{lines}",
          flush=True)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory):
    server = NatsServer(store_dir=tmp_path_factory.mktemp("nats") / "js", monitor_port=free_port()).start()
    yield server
    server.stop()


@pytest.fixture
def cluster_hold(request: pytest.FixtureRequest) -> float:
    """How long a cluster incident must stay named: 30 s in `make test`, 5 minutes in `make test-cluster`."""
    return float(request.config.getoption("cluster_hold"))


@pytest.fixture(scope="session")
def live_site(nats_server, tmp_path_factory, request):
    """A collector, a workload and the dashboard over them, started once per session (per xdist
    worker: the tests that use it share an xdist group, so one worker starts it) and stopped after
    the last test that uses it, not at the session's end."""
    from tests.browser import LiveDashboard

    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is not installed: run `make test` (it installs Debian's chromium package)")
    site = LiveDashboard.start(nats_server.url, tmp_path_factory.mktemp("browser"))
    site.uses_left = sum("live_dashboard" in item.fixturenames for item in request.session.items)
    yield site
    site.close()


@pytest.fixture(scope="module")
def chromium():
    """Headless Chromium for one module of browser tests (see tests/browser.py for why not longer)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def live_dashboard(live_site, chromium):
    """(dashboard URL, browser, store) of the session's live dashboard."""
    yield live_site.base, chromium, live_site.store
    live_site.uses_left -= 1
    if live_site.uses_left <= 0:
        live_site.close()
        assert live_site.collector_exit == 0, "the live dashboard's collector did not end cleanly"


@pytest.fixture
def app_env(monkeypatch):
    """Settings the app reads, as `jetwatch dashboard` would hand them over (for the pages' tests
    under AppTest; here, so they need not import it as a name)."""
    import streamlit as st  # only the tests that use it pay for the import
    def apply(db: str, **extra: str) -> None:
        monkeypatch.setenv("JETWATCH_DB", db)
        monkeypatch.setenv("JETWATCH_HEALTH_MIN_SPAN", "0.5s")
        monkeypatch.setenv("JETWATCH_STALE_AFTER", "1h")
        for k, v in extra.items():
            monkeypatch.setenv(f"JETWATCH_{k.upper()}", v)
    st.cache_data.clear()
    yield apply
    st.cache_data.clear()


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    return str(tmp_path / "jetwatch.duckdb")


@pytest.fixture
def store(db_path: str) -> Store:
    return Store(db_path, lock_timeout=30)


@pytest.fixture
def uid() -> str:
    """A prefix unique to this test, so tests sharing the session's server never collide."""
    return f"T{next(_counter)}"


@pytest.fixture
def run():
    """Run a coroutine to completion in a fresh event loop."""
    return lambda coro: asyncio.run(coro)


STREAM, CONSUMER = "H<b&x_weird-name_1", "<i_c-1"
IDLE_STREAM = "DASH_IDLE"


@pytest.fixture(scope="session")
def filled_db(nats_server, tmp_path_factory) -> str:
    """A store the real collector filled: a pin story with a timeout and an admin unpin, and a
    consumer with work pending and nobody pulling."""
    db = str(tmp_path_factory.mktemp("dash") / "jetwatch.duckdb")
    store = Store(db)

    async def fill() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, IDLE_STREAM, ["dashidle.>"])
        await make_consumer(api, IDLE_STREAM, "idle")
        await publish(nc, "dashidle.x", 5)
        # A short window: the idle consumer, never seen pulling, is named after half of it.
        settings = collector_settings(nats_server.url, db, (STREAM, IDLE_STREAM), interval=0.3,
                                      health_window=4.0, health_min_span=0.5)
        async with collecting(settings):
            story = await pin_story(nc, api, STREAM, CONSUMER, "dashpins.work")
            await eventually(lambda: len(rows(store, "SELECT * FROM pin_events WHERE stream = ?", [STREAM])) >= 5,
                             message="the pin story stored")
            await eventually(lambda: rows(store, "SELECT count(DISTINCT ts) FROM samples WHERE stream = ?",
                                          [IDLE_STREAM])[0][0] >= 4, message="a few samples")
            await eventually(lambda: rows(store, "SELECT verdict FROM verdicts_current WHERE stream = ?",
                                          [IDLE_STREAM]) == [("NO_PULLERS",)], message="the idle consumer named")
        # Only after the collector stopped: workers leaving would end the last pin (a timeout
        # unpin) while a slow last cycle is still capturing.
        for w in story.workers:
            await w.stop()
        await nc.close()

    asyncio.run(fill())
    return db


