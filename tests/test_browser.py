"""The real dashboard server in headless Chromium, while a real collector writes to the store."""

from __future__ import annotations

import socket

import nats
import pytest
from nats.aio.client import Client
from playwright.sync_api import Page

from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.core.pin_announce import VERIFIED, PinAnnouncer
from jetwatch.demo.workers import PullWorker
from jetwatch.store.database import Store
from tests.browser import CONSUMER, STREAM, no_errors, own_site, shoot, tick_first_row
from tests.helpers import (
    OPERATOR_PASSWORD,
    LoopThread,
    eventually,
    make_consumer,
    make_stream,
    publish,
    rows,
    wait_until,
)

# One worker runs these and test_browser_fleet_layout.py, so the session's live dashboard
# (conftest's live_site) starts once.
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("live_dashboard")]


def _page(browser, url: str) -> Page:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(url)
    return page


@pytest.mark.screenshots
def test_fleet_page_in_chromium_shows_verdicts_while_the_collector_writes(live_dashboard):
    base, browser, _ = live_dashboard
    page = _page(browser, base + "/")
    page.get_by_text("Data as of").filter(visible=True).first.wait_for(timeout=30_000)
    page.get_by_text("NO_PULLERS").first.wait_for(timeout=30_000)
    page.get_by_text("capture: durable stream").filter(visible=True).first.wait_for(timeout=30_000)
    # The page refreshes itself every two seconds: several reads while the collector writes.
    first = page.get_by_text("Data as of").inner_text()
    wait_until(lambda: page.get_by_text("Data as of").inner_text() != first, timeout=30, message="a refresh")
    no_errors(page)
    shoot(page, "live-fleet.png")
    page.close()


@pytest.mark.screenshots
def test_pins_page_in_chromium_shows_the_timeline_with_unpin_reasons(live_dashboard):
    base, browser, _ = live_dashboard
    page = _page(browser, base + "/pins")
    page.get_by_text(f"{STREAM} / {CONSUMER} [jobs]").first.wait_for(timeout=30_000)
    page.get_by_text("unpinned: timeout").filter(visible=True).first.wait_for(timeout=30_000)
    page.get_by_text("unpinned: admin").filter(visible=True).first.wait_for(timeout=30_000)
    page.get_by_text("Pin events (5)").filter(visible=True).first.wait_for(timeout=30_000)
    no_errors(page)
    shoot(page, "live-pins.png")
    page.close()


def test_pins_page_in_chromium_says_why_each_pin_moved(live_dashboard):
    """The story's stalled holder (priority_timeout) and admin unpin (an operator unpin, its requester named
    by the server's API audit advisory), counted in words above the tables (their cells are a canvas)."""
    import re

    base, browser, _ = live_dashboard
    page = _page(browser, base + "/pins")
    page.get_by_text("Why pins moved").filter(visible=True).first.wait_for(timeout=30_000)
    page.get_by_text(re.compile(r"pin moves in range: .*operator unpin")).filter(visible=True).first.wait_for(
        timeout=30_000)
    page.get_by_text(re.compile(r"pin moves in range: .*priority_timeout")).filter(visible=True).first.wait_for(
        timeout=30_000)
    no_errors(page)
    page.close()


def test_consumer_page_in_chromium_says_whether_a_standby_waits(live_dashboard):
    """The story's two workers: the Standby tile and its finding, in words outside any grid."""
    import re

    base, browser, _ = live_dashboard
    page = _page(browser, f"{base}/consumer?stream={STREAM}&consumer={CONSUMER}")
    page.get_by_text("Standby", exact=True).filter(visible=True).first.wait_for(timeout=30_000)
    page.get_by_text(re.compile(r"a standby waits: if the holder stops|No standby: if the holder stops")).filter(
        visible=True).first.wait_for(timeout=30_000)
    no_errors(page)
    page.close()


@pytest.mark.screenshots
def test_consumer_deep_link_in_chromium(live_dashboard):
    base, browser, _ = live_dashboard
    page = _page(browser, f"{base}/consumer?stream={STREAM}&consumer={CONSUMER}")
    page.get_by_text(f"{STREAM} / {CONSUMER}", exact=True).filter(visible=True).first.wait_for(timeout=30_000)
    page.get_by_text("pending (not yet delivered)").filter(visible=True).first.wait_for(timeout=30_000)
    no_errors(page)
    shoot(page, "live-consumer.png")
    page.close()


def test_fleet_row_unpin_in_chromium_is_confirmed_and_audited(live_dashboard):
    """The on-call path: sign in, pick the consumer's row, Unpin, Confirm."""
    base, browser, store = live_dashboard
    # The session's live dashboard is shared: the audit rows that count are the ones after this.
    since = rows(store, "SELECT coalesce(max(ts), TIMESTAMPTZ '1970-01-01 00:00:00+00') FROM audit")[0][0]
    audit = ("SELECT actor, origin, action, stream, consumer, group_name, outcome FROM audit "
             "WHERE phase = 'outcome' AND ts > ?")
    page = _page(browser, base + "/")
    page.get_by_label("Operator name").fill("oncall")
    page.get_by_label("Password", exact=True).fill(OPERATOR_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_text("signed in as oncall").filter(visible=True).first.wait_for(timeout=30_000)
    search = page.get_by_label("Search consumer or stream")
    search.fill(CONSUMER)
    search.press("Enter")
    page.get_by_text("1 of 2 consumers shown").filter(visible=True).first.wait_for(timeout=30_000)
    tick_first_row(page, shows=(STREAM, CONSUMER))
    page.get_by_role("button", name="Unpin").click()
    page.get_by_text(f"stream {STREAM}, consumer {CONSUMER}, group jobs").filter(visible=True).first.wait_for(timeout=30_000)
    page.get_by_role("button", name="Confirm").click()
    page.get_by_text(f"unpin {STREAM} / {CONSUMER} (account").first.wait_for(timeout=30_000)  # the banner names its target
    no_errors(page)
    wait_until(lambda: rows(store, audit, [since]), timeout=30, message="the audit row")
    assert rows(store, audit, [since]) == [("oncall", "dashboard", "unpin", STREAM, CONSUMER, "jobs", "ok")]
    page.close()


HOLDER, HOLDER_VERSION = "billing-7f9c", "4.2.1"  # a pod's name (a tile holds 12 characters whole) and release


def test_an_announced_pin_holder_is_named_verified_on_the_consumer_and_pins_pages(nats_server, chromium, uid,
                                                                                  tmp_path):
    """Who holds the pin, end to end: a worker connected under its pod's name announces itself when the
    server pins it (PinAnnouncer), a collector that may ask CONNZ captures and verifies the announcement,
    and the dashboard names the holder, verified, on the consumer's Pin holder tile (its host and version
    in the tile's help) and on the Pins page's sessions. Its own collector (the session's live one has no
    CONNZ to verify with) and dashboard, the session's server and this module's browser."""
    stream, consumer, subject = f"{uid}_PINWHO", "billing", f"{uid.lower()}.pinwho.x"
    loop = LoopThread()  # the worker runs while the browser blocks this thread
    worker: PullWorker | None = None
    nc: Client | None = None
    pin = ""

    async def pinned_worker() -> tuple[Client, PullWorker, str]:
        conn = await nats.connect(nats_server.url, name=HOLDER)
        api = JetStreamAPI(conn)
        await make_stream(api, stream, [f"{uid.lower()}.pinwho.>"])
        await make_consumer(api, stream, consumer, "pinned_client", timeout_s=30)
        w = PullWorker(conn, stream, consumer, group="jobs", name=HOLDER,
                       announcer=PinAnnouncer(conn, stream, consumer, group="jobs", version=HOLDER_VERSION)).start()
        await publish(conn, subject, 5)
        return conn, w, await eventually(lambda: w.pin_id, timeout=30, message="the worker pinned")

    def announced(store: Store) -> None:
        """An announcement is read by a plain subscription: the collector listens before the worker is pinned."""
        nonlocal nc, worker, pin
        nc, worker, pin = loop.call(pinned_worker())
        holder = "SELECT name, verification, version FROM pin_holders WHERE pin_id = ?"
        wait_until(lambda: rows(store, holder, [pin]) == [(HOLDER, VERIFIED, HOLDER_VERSION)], timeout=30,
                   message="the announcement stored, verified against CONNZ")

    try:
        with own_site(nats_server.url, tmp_path, stream, "--interval", "0.5s", "--monitor-url",
                      nats_server.monitor_url, before_dashboard=announced) as (base, _):
            page = chromium.new_page(viewport={"width": 1280, "height": 800})
            page.goto(f"{base}/consumer?stream={stream}&consumer={consumer}")
            # The tile holds the name; whether it was verified is said under it; host and version in its help.
            tile = page.locator('[data-testid="stColumn"]').filter(
                has=page.locator('[data-testid="stMetricLabel"]', has_text="Pin holder"))

            def tile_says() -> tuple[str, str] | None:
                if tile.count() != 1:
                    return None
                texts = (tile.locator('[data-testid="stMetricValue"]').all_inner_texts(),
                         tile.locator('[data-testid="stCaptionContainer"]').all_inner_texts())
                return (texts[0][0].strip(), texts[1][0].strip()) if texts[0] and texts[1] else None

            seen = wait_until(lambda: (said := tile_says()) and said[0] == HOLDER and said, timeout=30,
                              message=f"the Pin holder tile naming {HOLDER}")
            assert seen == (HOLDER, "verified"), seen
            tile.locator('[data-testid="stTooltipHoverTarget"]').first.hover()
            help_text = page.get_by_text(f"Announced by {HOLDER} (host ").filter(visible=True).first
            help_text.wait_for(timeout=30_000)
            said = help_text.inner_text()
            assert all(part in said for part in (f"host {socket.gethostname()}", f"version {HOLDER_VERSION}",
                                                 f"named '{HOLDER}'")), said  # the last: what CONNZ showed
            no_errors(page)

            # The Pins page: the pin's bar in the timeline is labelled with the holder's name, and its session
            # names the holder, verified, in the sessions table's drawn cells.
            page.goto(f"{base}/pins?search={stream}")
            timeline = page.locator(".st-key-pins_timeline")
            wait_until(lambda: HOLDER in timeline.inner_text(), timeout=30, message="the timeline's bar named by its holder")
            grid = page.locator('[data-testid="stDataFrame"] table[role="grid"]').filter(
                has=page.locator('th[role="columnheader"]', has_text="Pin id (tail)")).first

            def session_row() -> dict[str, str] | None:
                if grid.count() == 0:
                    return None
                headers = [h.strip() for h in grid.locator('th[role="columnheader"]').all_inner_texts()]
                for r in grid.locator('tbody tr[role="row"]').all():
                    cells = dict(zip(headers, (c.strip() for c in r.locator('td[role="gridcell"]').all_inner_texts())))
                    if cells.get("Pin id (tail)") == "…" + pin[-6:]:
                        return cells
                return None

            row = wait_until(session_row, timeout=30, message="the pin's session on the Pins page")
            assert row["Pin holder"] == f"{HOLDER} · verified", row
            no_errors(page)
            page.close()
    finally:
        if worker is not None:
            loop.call(worker.stop())
        if nc is not None:
            loop.call(nc.close())
        loop.close()
