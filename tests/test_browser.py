"""The real dashboard server in headless Chromium, while a real collector writes to the store."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from tests.browser import CONSUMER, STREAM, no_errors, shoot, tick_first_row
from tests.helpers import OPERATOR_PASSWORD, rows, wait_until

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
    # The page refreshes itself every second: several reads while the collector writes.
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
