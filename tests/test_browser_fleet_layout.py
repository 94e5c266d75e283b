"""The on-call pages on a 1280x800 laptop screen in headless Chromium, against a real collector,
workers and dashboard: every Fleet row's verdict, stream and consumer are visible without
scrolling; the Consumer page refreshes itself; screenshots of every page for docs/pages.md
(`make screenshots`).

Streamlit's grid paints its cells on a canvas, but keeps an accessibility table in the DOM with
the header and the cells of the columns and rows it has drawn in view: that is what is read here,
and compared with the verdicts the store holds (read with plain SQL)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from playwright.sync_api import Page

from jetwatch.dashboard.tables import link_target
from tests.browser import CONSUMER, STREAM, no_errors, shoot, tick_first_row
from tests.helpers import rows, wait_until

# One worker runs these and test_browser.py: the session's live dashboard starts once.
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("live_dashboard")]

LAPTOP = {"width": 1280, "height": 800}
IDENTITY = ("Verdict", "Stream", "Consumer")


def laptop(browser, url: str) -> Page:
    page = browser.new_page(viewport=LAPTOP)
    page.goto(url)
    return page


def drawn_grid(page: Page) -> tuple[list[str], list[list[str]]]:
    """The first grid's drawn headers and rows, from its accessibility table."""
    grid = page.locator('[data-testid="stDataFrame"] table[role="grid"]').first
    headers = [h.strip() for h in grid.locator('th[role="columnheader"]').all_inner_texts()]
    body = [[c.strip() for c in r.locator('td[role="gridcell"]').all_inner_texts()]
            for r in grid.locator('tbody tr[role="row"]').all()]
    return headers, body


def test_fleet_at_1280_shows_verdict_stream_and_consumer_of_every_row_without_scrolling(live_dashboard):
    base, browser, store = live_dashboard
    page = laptop(browser, base + "/")
    page.get_by_text("Data as of").filter(visible=True).first.wait_for(timeout=30_000)
    page.get_by_text("consumers shown").filter(visible=True).first.wait_for(timeout=30_000)
    wait_until(lambda: all(h in drawn_grid(page)[0] for h in IDENTITY) and drawn_grid(page)[1], timeout=30,
               message="the grid drew its identity columns")
    headers, body = drawn_grid(page)
    where = {h: headers.index(h) for h in IDENTITY}
    stored = dict(rows(store, "SELECT stream || ' / ' || consumer, verdict FROM verdicts_current WHERE stream LIKE 'BROWSER_%'"))
    assert len(body) == len(stored)  # every row drawn in view
    seen = {}
    for cells in body:
        verdict, stream, link = (cells[where[h]] for h in IDENTITY)
        consumer = link_target(link)["consumer"]  # the link's text is the consumer's name (CONSUMER_IN_LINK)
        assert verdict and stream and consumer, cells
        seen[f"{stream} / {consumer}"] = verdict
    assert set(seen) == set(stored)
    # The page itself never scrolls sideways, and the grid ends inside the window.
    assert page.evaluate("document.documentElement.scrollWidth") <= LAPTOP["width"]
    box = page.locator('[data-testid="stDataFrame"]').first.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= LAPTOP["width"]
    no_errors(page)
    page.close()


def test_consumer_page_refreshes_itself_at_1280(live_dashboard):
    base, browser, _ = live_dashboard
    page = laptop(browser, f"{base}/consumer?stream={STREAM}&consumer={CONSUMER}")
    caption = page.get_by_text("Data as of")
    caption.wait_for(timeout=30_000)
    first = caption.inner_text()
    wait_until(lambda: page.get_by_text("Data as of").inner_text() != first, timeout=30,
               message="the Consumer page refreshed without a click")
    page.get_by_text("Next step:").first.wait_for(timeout=30_000)
    # Every tile's value fits its tile: none is cut with an ellipsis.
    values = page.locator('[data-testid="stMetricValue"]')
    wait_until(lambda: values.count() >= 8, timeout=30, message="the consumer's tiles")
    cut = page.evaluate("""() => [...document.querySelectorAll('[data-testid="stMetricValue"]')]
        .flatMap(v => [v, ...v.querySelectorAll('*')]).filter(e => e.scrollWidth > e.clientWidth + 1)
        .map(e => e.innerText)""")
    assert not cut, cut
    no_errors(page)
    page.close()


IMPACT = ("Pending (msgs)", "In flight / max", "Oldest unacked", "Drain ETA")


def test_fleet_at_1280_shows_the_impact_numbers_of_every_row_without_scrolling(live_dashboard):
    """Pending, in flight, the oldest unacked age and the ETA are drawn in view beside the identity
    columns, so an OK row with a growing backlog does not look fine; a selected row's cause and
    next step are said in full below the table, whatever its verdict."""
    base, browser, _ = live_dashboard
    page = laptop(browser, base + "/")
    page.get_by_text("consumers shown").filter(visible=True).first.wait_for(timeout=30_000)
    wait_until(lambda: drawn_grid(page)[1], timeout=30, message="the grid drew its rows")
    headers, _ = drawn_grid(page)
    assert all(h in headers for h in IDENTITY + IMPACT), headers
    # The cause and the next step, cut to their columns' width in the grid, are said in full below it.
    _select_the_consumer(page)
    wait_until(lambda: _panel(page), timeout=30, message="the panel naming the consumer below the table")
    page.get_by_text("Next step:").filter(visible=True).first.wait_for(timeout=30_000)
    no_errors(page)
    page.close()


def _select_the_consumer(page: Page) -> None:
    """Search the workload's consumer and tick its row (the grid's selection box, under the header)."""
    search = page.get_by_label("Search consumer or stream")
    search.fill(CONSUMER)
    search.press("Enter")
    page.get_by_text("1 of 2 consumers shown").filter(visible=True).first.wait_for(timeout=30_000)
    tick_first_row(page, shows=(STREAM, CONSUMER))


def _panel(page: Page) -> str:
    """The selected-row panel's text: its line naming the consumer, its findings and next steps."""
    found = page.locator('[data-testid="stMarkdownContainer"]').filter(has_text=f"{STREAM} / {CONSUMER}")
    return "\n".join(found.all_inner_texts())


def test_fleet_selected_row_panel_refreshes_with_the_table_and_keeps_its_selection(live_dashboard):
    """After a row is picked, the panel below refreshes with the table, no click needed (its "since
    … (N ago)" moves on and its verdict is the row's), and the row stays ticked."""
    import re

    base, browser, _ = live_dashboard
    page = laptop(browser, base + "/")
    page.get_by_text("consumers shown").filter(visible=True).first.wait_for(timeout=30_000)
    _select_the_consumer(page)
    page.get_by_text("Clear selection").filter(visible=True).first.wait_for(timeout=30_000)

    def panel_age() -> str | None:
        found = re.search(r"since [^()]* \(([^()]*) ago\)", _panel(page))
        return found.group(1) if found else None

    first = wait_until(panel_age, timeout=30, message="the panel's since")
    seen: list[object] = []

    def moved_with_the_row() -> bool:
        headers, body = drawn_grid(page)
        age = panel_age()
        seen[:] = [body[:1], _panel(page)]
        return bool(body) and age is not None and age != first and \
            f": {dict(zip(headers, body[0])).get('Verdict')} since" in _panel(page)

    try:
        wait_until(moved_with_the_row, timeout=20, message="the panel refreshed with the row")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the row and the panel last seen: {seen}") from None
    ticked = page.locator('[data-testid="stDataFrame"] table[role="grid"] tbody tr[role="row"][aria-selected="true"]')
    assert ticked.count() == 1, page.locator('[data-testid="stDataFrame"] table[role="grid"] tbody').inner_html()[:3000]
    no_errors(page)
    page.close()


@pytest.mark.screenshots
@pytest.mark.heavy  # its pages' checks are the other tests'; what it adds is the docs' pictures
def test_screenshots_of_every_page_at_1280(live_dashboard, nats_server):
    base, browser, store = live_dashboard
    # One real operator action, so the Audit page and the timeline's overlay have something to show.
    done = subprocess.run([sys.executable, "-m", "jetwatch.cli", "unpin", STREAM, CONSUMER, "--group", "jobs", "--yes",
                           "--actor", "oncall", "--db", str(store.path), "--server", nats_server.url],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    for name, path, ready in (("fleet", "/", ("consumers shown",)),
                              ("consumer", f"/consumer?stream={STREAM}&consumer={CONSUMER}",
                               ("Next step:", "pending (not yet delivered)")),
                              ("pins", "/pins", ("Sessions", "unpinned: timeout", "operator action")),
                              ("audit", "/audit", ("actions shown",))):
        page = laptop(browser, base + path)
        for text in ready:  # charts draw after the page's text
            page.get_by_text(text).first.wait_for(timeout=30_000)
        no_errors(page)
        shoot(page, f"1280-{name}.png", full_page=False)
        page.close()
