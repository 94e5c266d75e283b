"""The real dashboard server in headless Chromium, while a real collector writes to the store."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import nats
import pytest
from playwright.sync_api import Page, sync_playwright

from jetwatch.demo.server import free_port
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.store.database import Store
from tests.helpers import OPERATOR_PASSWORD, make_consumer, make_stream, operators_file, publish, rows, wait_until
from tests.scenario import pin_story

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "docs" / "screenshots"
STREAM, CONSUMER = "BROWSER_orders", "fulfilment"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]


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


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def _stop(proc: subprocess.Popen[bytes], timeout: float = 30) -> int:
    """SIGTERM, then SIGKILL if it does not end in time: a fixture never leaves its process behind."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(10)


@pytest.fixture(scope="module")
def live_dashboard(nats_server, tmp_path_factory):
    if not shutil.which("chromium") and not Path("/usr/bin/chromium").exists():
        pytest.fail("Chromium is not installed: run `make test` (it installs Debian's chromium package)")
    tmp = tmp_path_factory.mktemp("browser")
    db = str(tmp / "jetwatch.duckdb")
    env = {**os.environ, "JETWATCH_INCLUDE_STREAMS": "BROWSER_*", "JETWATCH_INFERENCE_GRACE": "1.5s"}
    # Every process is stopped in `finally`, whatever fails on the way: a setup that raised used to
    # leave its collector (and dashboard) running after the session.
    collector = dashboard = None
    work = Workload(nats_server.url)
    try:
        collector = subprocess.Popen(
            [sys.executable, "-m", "jetwatch.cli", "collect", "--server", nats_server.url, "--db", db,
             # The collector judges, the pages read its verdicts; a short window names the demo's
             # consumer that nobody ever pulls after half of it.
             "--interval", "0.5s", "--health-window", "8s", "--health-min-span", "1s"],
            env=env, stdout=open(tmp / "collector.log", "wb"), stderr=subprocess.STDOUT)
        store = Store(db)
        wait_until(lambda: store.exists() and not store.query("collector_health").empty, timeout=30,
                   message="the collector's first cycle (its advisory capture is open)")
        work.start()
        assert work.ready.wait(60), "workload did not start"
        if work.error:
            raise work.error
        port = free_port()
        dashboard = subprocess.Popen(
            [sys.executable, "-m", "jetwatch.cli", "dashboard", "--db", db, "--port", str(port), "--refresh", "1s",
             "--health-min-span", "1s", "--server", nats_server.url],
            env={**env, "JETWATCH_OPERATORS_FILE": operators_file(tmp, "oncall")}, stdout=open(tmp / "dashboard.log", "wb"),
            stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        wait_until(lambda: _http_ok(base + "/_stcore/health"), timeout=60, message="dashboard health endpoint")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            try:
                yield base, browser, store
            finally:
                browser.close()
    finally:
        if dashboard is not None:
            _stop(dashboard)
        if work.is_alive():
            work.stop()
        if collector is not None:
            assert _stop(collector) == 0


def _page(browser, url: str) -> Page:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(url)
    return page


def _no_errors(page: Page) -> None:
    body = page.inner_text("body")
    for bad in ("Traceback", "locked", "Conflicting lock", "Error:"):
        assert bad not in body, body[:2000]


def test_fleet_page_in_chromium_shows_verdicts_while_the_collector_writes(live_dashboard):
    base, browser, _ = live_dashboard
    page = _page(browser, base + "/")
    page.get_by_text("Data as of").filter(visible=True).first.wait_for(timeout=30_000)
    page.get_by_text("NO_PULLERS").first.wait_for(timeout=30_000)
    page.get_by_text("capture: durable stream").filter(visible=True).first.wait_for(timeout=30_000)
    # The page refreshes itself every second: several reads while the collector writes.
    first = page.get_by_text("Data as of").inner_text()
    wait_until(lambda: page.get_by_text("Data as of").inner_text() != first, timeout=30, message="a refresh")
    _no_errors(page)
    page.wait_for_timeout(1500)  # the grid paints on a canvas a moment after the data arrives
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "live-fleet.png"), full_page=True)
    page.close()


def test_pins_page_in_chromium_shows_the_timeline_with_unpin_reasons(live_dashboard):
    base, browser, _ = live_dashboard
    page = _page(browser, base + "/pins")
    page.get_by_text(f"{STREAM} / {CONSUMER} [jobs]").first.wait_for(timeout=30_000)
    page.get_by_text("unpinned: timeout").filter(visible=True).first.wait_for(timeout=30_000)
    page.get_by_text("unpinned: admin").filter(visible=True).first.wait_for(timeout=30_000)
    page.get_by_text("5 pin events in range").filter(visible=True).first.wait_for(timeout=30_000)
    _no_errors(page)
    page.wait_for_timeout(1500)
    page.screenshot(path=str(SHOTS / "live-pins.png"), full_page=True)
    page.close()


def test_consumer_deep_link_in_chromium(live_dashboard):
    base, browser, _ = live_dashboard
    page = _page(browser, f"{base}/consumer?stream={STREAM}&consumer={CONSUMER}")
    page.get_by_text(f"{STREAM} / {CONSUMER}", exact=True).filter(visible=True).first.wait_for(timeout=30_000)
    page.get_by_text("pending (not yet delivered)").filter(visible=True).first.wait_for(timeout=30_000)
    _no_errors(page)
    page.wait_for_timeout(1000)
    page.screenshot(path=str(SHOTS / "live-consumer.png"), full_page=True)
    page.close()


def test_fleet_row_unpin_in_chromium_is_confirmed_and_audited(live_dashboard):
    """The on-call path: sign in, pick the consumer's row, Unpin, Confirm."""
    base, browser, store = live_dashboard
    page = _page(browser, base + "/")
    page.get_by_label("Operator name").fill("oncall")
    page.get_by_label("Password", exact=True).fill(OPERATOR_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_text("signed in as oncall").filter(visible=True).first.wait_for(timeout=30_000)
    search = page.get_by_label("Search consumer or stream")
    search.fill(CONSUMER)
    search.press("Enter")
    page.get_by_text("1 of 2 consumers shown").filter(visible=True).first.wait_for(timeout=30_000)
    page.wait_for_timeout(1000)  # the grid paints on a canvas a moment after the data arrives
    box = page.locator('[data-testid="stDataFrame"]').first.bounding_box()
    page.mouse.click(box["x"] + 18, box["y"] + 35 + 17)  # the first row's selection box, under the header
    page.get_by_role("button", name="Unpin").click()
    page.get_by_text(f"stream {STREAM}, consumer {CONSUMER}, group jobs").filter(visible=True).first.wait_for(timeout=30_000)
    page.get_by_role("button", name="Confirm").click()
    page.get_by_text(f"unpin {STREAM} / {CONSUMER} (account").first.wait_for(timeout=30_000)  # the banner names its target
    _no_errors(page)
    audit = "SELECT actor, origin, action, stream, consumer, group_name, outcome FROM audit WHERE phase = 'outcome'"
    wait_until(lambda: rows(store, audit), timeout=30, message="the audit row")
    assert rows(store, audit) == [("oncall", "dashboard", "unpin", STREAM, CONSUMER, "jobs", "ok")]
    page.close()
