"""What the Chromium tests share: how Chromium is launched, a live dashboard over a real collector
and workload (started once per test session by conftest.py), and the screenshots in docs/.

Playwright's sync API marks its event loop as running between calls, so while a browser is open
no `asyncio.run()` can start in the same thread: a browser is opened per module (or per test) by
modules that hold only browser tests, never for a whole session in which other tests run."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest
from playwright.sync_api import Browser, Page, Playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from jetwatch.core.embedded_server import free_port
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.store.database import Store
from tests.helpers import clean_env, make_consumer, make_stream, operators_file, publish, wait_until
from tests.loopback import WebSocketProbe
from tests.scenario import pin_story

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "docs" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
STREAM, CONSUMER = "BROWSER_orders", "fulfilment"


_lacking: list[str] | None = None  # what this process's Chromium could not do, probed at its first launch


def launch_chromium(p: Playwright) -> Browser:
    """Headless Chromium as every browser test launches it. The first launch in a process checks
    what the tests need of the browser; one that lacks any of it fails each browser test with a
    sentence saying what, rather than with a timeout somewhere inside a page."""
    global _lacking
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium is not installed at {CHROMIUM}: run `make test` (it installs Debian's chromium package)")
    browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    if _lacking is None:
        _lacking = lacking(browser)
    if _lacking:
        version = browser.version
        browser.close()
        pytest.fail(f"Chromium {version} at {CHROMIUM} does not {'; nor does it '.join(_lacking)}. The browser tests "
                    "need this of the browser; install the chromium package Debian ships for this release.")
    return browser


def lacking(browser: Browser, wait_s: float = 15.0, **context_options: Any) -> list[str]:
    """What the dashboard needs of a browser, tried on a loopback page: its scripts run, and it
    opens a WebSocket (every Streamlit session runs on one) carrying the page's cookie (a sign-in
    rides on it) and origin (the dashboard refuses a WebSocket from a foreign one)."""
    missing = []
    with WebSocketProbe() as probe:
        context = browser.new_context(**context_options)
        try:
            page = context.new_page()
            page.goto(f"http://127.0.0.1:{probe.port}/", wait_until="load", timeout=30_000)
            if page.evaluate("1 + 1") != 2:
                missing.append("run a page's scripts")
            try:
                page.wait_for_function(f"document.title === {probe.MESSAGE!r}", timeout=wait_s * 1000)
            except PlaywrightTimeout:
                missing.append(f"open a WebSocket to a page on 127.0.0.1 and read its messages (title: {page.title()!r})")
        finally:
            context.close()
    sent = probe.upgrade_headers or {}
    if probe.upgrade_headers is not None and "probe=1" not in sent.get("cookie", ""):
        missing.append("send the page's cookies on its WebSocket")
    if probe.upgrade_headers is not None and sent.get("origin") != f"http://127.0.0.1:{probe.port}":
        missing.append(f"send the page's Origin on its WebSocket (sent {sent.get('origin')!r})")
    return missing



class Workload(threading.Thread):
    """Pinned workers and an idle consumer, running until stopped."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url = url
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self._stop_flag = threading.Event()

    def run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported to the fixture
            self.error = exc
            self.ready.set()

    async def _main(self) -> None:
        nc = await nats.connect(self.url)
        api = JetStreamAPI(nc)
        await make_stream(api, "BROWSER_idle", ["browseridle.>"])
        await make_consumer(api, "BROWSER_idle", "archive")
        await publish(nc, "browseridle.x", 3)
        story = await pin_story(nc, api, STREAM, CONSUMER, "browser.work")
        self.ready.set()
        while not self._stop_flag.is_set():
            await publish(nc, "browser.work", 1)
            await asyncio.sleep(0.2)
        for w in story.workers:
            await w.stop()
        await nc.close()

    def stop(self) -> None:
        self._stop_flag.set()
        self.join(20)


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def stop(proc: subprocess.Popen[bytes], timeout: float = 30) -> int:
    """SIGTERM, then SIGKILL if it does not end in time: a fixture never leaves its process behind."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(10)


@dataclass
class LiveDashboard:
    """A collector sampling the session's server while a workload pins and unpins, and the
    dashboard serving its store. `close()` stops all three (idempotent)."""

    base: str
    store: Store
    collector: subprocess.Popen[bytes] | None = None
    dashboard: subprocess.Popen[bytes] | None = None
    work: Workload | None = None
    collector_exit: int | None = None
    uses_left: int = 0  # tests still to use it in this session (conftest's live_site)

    @classmethod
    def start(cls, server_url: str, tmp: Path) -> LiveDashboard:
        db = str(tmp / "jetwatch.duckdb")
        env = {**os.environ, "JETWATCH_INCLUDE_STREAMS": "BROWSER_*", "JETWATCH_INFERENCE_GRACE": "1.5s"}
        live = cls(base="", store=Store(db), work=Workload(server_url))
        # Every process is stopped by close(), whatever fails on the way: a setup that raised used
        # to leave its collector (and dashboard) running after the session.
        try:
            live.collector = subprocess.Popen(
                [sys.executable, "-m", "jetwatch.cli", "collect", "--server", server_url, "--db", db,
                 # The collector judges, the pages read its verdicts; a short window names the demo's
                 # consumer that nobody ever pulls after half of it.
                 "--interval", "1s", "--health-window", "8s", "--health-min-span", "1s"],
                env=env, stdout=open(tmp / "collector.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115 (the child's)
            wait_until(lambda: first_cycle_done(live.store), timeout=30,
                       message="the collector's first cycle (its advisory capture is open)")
            live.work.start()
            assert live.work.ready.wait(60), "workload did not start"
            if live.work.error:
                raise live.work.error
            port = free_port()
            live.dashboard = subprocess.Popen(
                [sys.executable, "-m", "jetwatch.cli", "dashboard", "--db", db, "--port", str(port), "--refresh", "2s",
                 "--health-min-span", "1s", "--server", server_url],
                env={**env, "JETWATCH_OPERATORS_FILE": operators_file(tmp, "oncall")},
                stdout=open(tmp / "dashboard.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115 (the child's)
            live.base = f"http://127.0.0.1:{port}"
            wait_until(lambda: http_ok(live.base + "/_stcore/health"), timeout=60, message="dashboard health endpoint")
        except BaseException:
            live.close()
            raise
        return live

    def close(self) -> None:
        if self.dashboard is not None:
            stop(self.dashboard)
            self.dashboard = None
        if self.work is not None and self.work.is_alive():
            self.work.stop()
        if self.collector is not None:
            self.collector_exit = stop(self.collector)
            self.collector = None


def first_cycle_done(store: Store) -> bool:
    """The collector has completed a cycle: its store exists and says so. A file it has created but
    not yet brought to the schema (its first write still running) is not ready, not an error."""
    import duckdb

    try:
        return store.exists() and not store.query("collector_health").empty
    except duckdb.CatalogException:
        return False


GRID_ROWS = '[data-testid="stDataFrame"] table[role="grid"] tbody tr[role="row"]'


def first_row_names(page: Page) -> tuple[str, str] | None:
    """(stream, consumer) of the first grid's first drawn row, read from its consumer link."""
    from jetwatch.dashboard.tables import link_target

    row = page.locator(GRID_ROWS).first
    if row.count() == 0:
        return None
    for cell in row.locator('td[role="gridcell"]').all_inner_texts():
        if cell.strip().startswith("consumer?"):
            target = link_target(cell.strip())
            return target.get("stream", ""), target.get("consumer", "")
    return None


def tick_first_row(page: Page, timeout: float = 30.0, shows: tuple[str, str] | None = None) -> None:
    """Tick the first grid's first row (its selection box, under the header) and return once the
    grid says a row is selected. The grid lays its rows out a moment after the data arrives, and a
    page rerunning under load may still be drawing it: a click it never received is made again,
    never one on a row already ticked (that would untick it).

    `shows` (stream, consumer): first wait until the first row is that consumer's. A filter's run
    draws the words above the grid ("1 of 2 consumers shown") before the grid itself, and until
    the new grid arrives the one before the filter is on screen, and clickable: its first row may
    be another consumer's."""
    import time

    page.locator(GRID_ROWS).first.wait_for(state="attached", timeout=timeout * 1000)
    if shows is not None:
        wait_until(lambda: first_row_names(page) == shows, timeout=timeout,
                   message=f"the grid's first row showing {shows[0]} / {shows[1]}")
    ticked = page.locator(GRID_ROWS + '[aria-selected="true"]')
    deadline = time.monotonic() + timeout
    while True:
        box = page.locator('[data-testid="stDataFrame"]').first.bounding_box()
        if box is not None and ticked.count() == 0:
            page.mouse.click(box["x"] + 18, box["y"] + 35 + 17)
        try:
            ticked.first.wait_for(state="attached", timeout=5_000)
            return
        except PlaywrightTimeout:
            if time.monotonic() > deadline:
                raise AssertionError(f"no row ticked after {timeout:.0f}s of clicking its selection box") from None


def no_errors(page: Page) -> None:
    body = page.inner_text("body")
    for bad in ("Traceback", "locked", "Conflicting lock", "Error:"):
        assert bad not in body, body[:2000]


def shoot(page: Page, name: str, full_page: bool = True) -> None:
    """Write the docs' screenshot `name` when the run was asked for them (`make screenshots`,
    i.e. `pytest --screenshots`); a plain test run leaves docs/screenshots/ as it is."""
    if os.environ.get("JW_SCREENSHOTS") != "1":
        return
    page.wait_for_timeout(1500)  # the grid paints on a canvas a moment after the data arrives
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name), full_page=full_page)


@contextlib.contextmanager
def own_site(server_url: str, tmp: Path, include: str, *collect_args: str,
             before_dashboard: Callable[[Store], None] | None = None) -> Iterator[tuple[str, Store]]:
    """A collector of its own on the streams matching `include` (with `collect_args`, e.g. a short
    health window) and a dashboard over its store: (dashboard URL, store), once the collector has
    completed a cycle (its advisory capture is open) and the dashboard answers. For a browser test
    that needs settings the session's live dashboard does not have. `before_dashboard(store)` runs
    between the two (e.g. to start a workload the collector must see from its start). Both stopped
    on the way out, whatever failed."""
    db = str(tmp / "jetwatch.duckdb")
    store = Store(db)
    env = clean_env(JETWATCH_INCLUDE_STREAMS=include)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with open(tmp / "collector.log", "wb") as log:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "jetwatch.cli", "collect", "--server", server_url, "--db", db, *collect_args],
                env=env, stdout=log, stderr=subprocess.STDOUT))
        wait_until(lambda: first_cycle_done(store), timeout=60,
                   message="the collector's first cycle (its advisory capture is open)")
        if before_dashboard is not None:
            before_dashboard(store)
        port = free_port()
        with open(tmp / "dashboard.log", "wb") as log:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "jetwatch.cli", "dashboard", "--db", db, "--port", str(port), "--refresh", "2s"],
                env=env, stdout=log, stderr=subprocess.STDOUT))
        base = f"http://127.0.0.1:{port}"
        wait_until(lambda: http_ok(base + "/_stcore/health"), timeout=60, message="dashboard health endpoint")
        yield base, store
    finally:
        for proc in reversed(procs):
            stop(proc)
