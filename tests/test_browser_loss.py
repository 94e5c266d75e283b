"""What will be lost, at 1280x800 in headless Chromium: on one real nats-server with real clients,
one collector and one dashboard, three consumers each about to lose work in its own way, and what
a person sees of each on the Consumer page (and the Fleet, where the product shows it).

- A consumer that falls behind on a stream with max_age: LOSING on the Fleet, and on its page the
  verdict's words with the projection and the Time to loss tile ("~…").
- A message naked until max_deliver drops it: listed under Dropped messages with its stream
  sequence, and the `nats stream get` line that reads it.
- ack_wait shorter than the work (jobs of 3 s, ack_wait 1 s): the configuration finding's title,
  its numbers and its fix beside the verdict.

AppTest reads these values (tests/test_loss.py, test_poison.py, test_config_findings.py); only a
browser shows whether they are drawn, in view and in words, at a laptop's width."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import nats
import pytest
from playwright.sync_api import Locator, Page

from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.demo.workers import PullWorker
from jetwatch.store.database import Store
from tests.browser import no_errors, own_site
from tests.helpers import LoopThread, make_consumer, make_stream, publish, rows, wait_until
from tests.incident_library import Client
from tests.test_browser_fleet_layout import LAPTOP, drawn_grid

pytestmark = [pytest.mark.browser]

VERDICTS = "SELECT consumer, verdict, config_findings::VARCHAR FROM verdicts_current"
DROPPED = "SELECT stream_seq, read_state FROM dropped_messages WHERE stream = ?"
# Deadlines, not waits: one run of five, on a 2-core machine under load (load average ~5), missed a
# 30 s deadline; a passing run takes none of it.
WAIT = 60.0


def shown(page: Page, text: str | re.Pattern[str], timeout: float = WAIT) -> Locator:
    """The first visible element with `text`, once it is drawn."""
    found = page.get_by_text(text).filter(visible=True).first
    found.wait_for(timeout=timeout * 1000)
    return found


def in_view(page: Page, element: Locator) -> None:
    """Drawn within the page's width: nothing of it cut off at the right."""
    box = element.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= LAPTOP["width"], box


def tile(page: Page, label: str) -> tuple[str, Locator]:
    """A metric tile's value as drawn, and its element."""
    column = page.locator('[data-testid="stColumn"]').filter(
        has=page.locator('[data-testid="stMetricLabel"]', has_text=label))
    value = column.locator('[data-testid="stMetricValue"]').first
    value.wait_for(timeout=WAIT * 1000)
    return value.inner_text().strip(), value


def grid_with(page: Page, header: str) -> dict[str, str] | None:
    """The first drawn row of the grid that has the column `header`, by header."""
    grid = page.locator('[data-testid="stDataFrame"] table[role="grid"]').filter(
        has=page.locator('th[role="columnheader"]', has_text=header)).first
    if grid.count() == 0:
        return None
    headers = [h.strip() for h in grid.locator('th[role="columnheader"]').all_inner_texts()]
    first = grid.locator('tbody tr[role="row"]').first
    if first.count() == 0:
        return None
    return dict(zip(headers, (c.strip() for c in first.locator('td[role="gridcell"]').all_inner_texts())))


def test_what_will_be_lost_is_shown_in_words_at_1280(nats_server, chromium, uid, tmp_path):
    loss, poison, short = f"{uid}_LOSS", f"{uid}_POISON", f"{uid}_ACKWAIT"
    sub = uid.lower()
    loop = LoopThread()  # the clients run while the browser blocks this thread
    clients: list[PullWorker] = []
    feeding = asyncio.Event()
    conn: list[Any] = []

    async def situations() -> None:
        nc = await nats.connect(nats_server.url)
        conn.append(nc)
        api = JetStreamAPI(nc)
        # Falls behind on a stream that removes messages after 120 s: 5 a second arrive, one a second
        # is worked. Nothing is removed during the test; the projection is ~(120 - age) / (1 - 1/5).
        await make_stream(api, loss, [f"{sub}.loss"], max_age=120_000_000_000)
        await make_consumer(api, loss, "work")
        clients.append(PullWorker(nc, loss, "work", name="slow", batch=1, work_s=1.0).start())

        async def feed() -> None:
            while not feeding.is_set():
                await nc.request(f"{sub}.loss", b"x", timeout=5)
                try:
                    await asyncio.wait_for(feeding.wait(), 0.2)
                except TimeoutError:
                    pass

        asyncio.get_running_loop().create_task(feed())
        # A message its client refuses every time, max_deliver 3, between two it takes.
        await make_stream(api, poison, [f"{sub}.poison.>"], allow_direct=True)
        await make_consumer(api, poison, "orders", max_deliver=3)
        clients.append(Client(nc, poison, "orders", nak_body=b"poison", expires_s=0.5).start())
        for n, body in ((41, b"fine"), (42, b"poison"), (43, b"fine")):
            await nc.request(f"{sub}.poison.order.{n}", body, timeout=5)
        # Jobs of 3 s on a consumer whose ack_wait is 1 s, two clients, no +WPI: work for minutes,
        # so the redeliveries the finding reads go on while the browser reaches the third page
        # (the finding is the window's: with 20 messages the work was done, and the finding gone,
        # before a loaded machine's browser got there).
        await make_stream(api, short, [f"{sub}.ackwait"])
        await make_consumer(api, short, "c", ack_wait=1_000_000_000)
        await publish(nc, f"{sub}.ackwait", 200)
        clients.extend(Client(nc, short, "c", name=f"aw{i}", batch=1, expires_s=1.0, job_s=3.0).start()
                       for i in range(2))

    def judged(store: Store) -> None:
        """The situations made, then judged: what the pages read is in the store."""
        loop.call(situations())

        def ready() -> bool:
            got = {c: (v, f or "") for c, v, f in rows(store, VERDICTS)}
            return (got.get("work", ("",))[0] == "LOSING" and "ack_wait_short" in got.get("c", ("", ""))[1]
                    and rows(store, DROPPED, [poison]) == [(2, "found")])
        wait_until(lambda: store.exists() and ready(), timeout=60, interval=0.25,
                   message="LOSING, the ack_wait finding and the dropped message in the store")

    try:
        with own_site(nats_server.url, tmp_path, f"{uid}_*", "--interval", "0.5s", "--health-window", "8s",
                      "--health-min-span", "1s", "--losing-after", "2s",
                      before_dashboard=judged) as (base, _):
            page = chromium.new_page(viewport=LAPTOP)

            # The Fleet: the losing consumer's row says LOSING, drawn in view.
            page.goto(base + "/")
            shown(page, "consumers shown")

            def fleet_row() -> dict[str, str] | None:
                headers, body = drawn_grid(page)
                for cells in body:
                    row = dict(zip(headers, cells))
                    if row.get("Stream") == loss:
                        return row
                return None

            row = wait_until(fleet_row, timeout=WAIT, message=f"the Fleet's row of {loss}")
            assert row["Verdict"] == "LOSING", row
            assert page.evaluate("document.documentElement.scrollWidth") <= LAPTOP["width"]
            no_errors(page)

            # 1. Time to data loss: the verdict with its projection, and the tile.
            page.goto(f"{base}/consumer?stream={loss}&consumer=work")
            said = shown(page, "removes messages the consumer has not processed in ~")
            assert said.inner_text().startswith("LOSING: at this rate the stream's max_age"), said.inner_text()
            in_view(page, said)
            box = said.bounding_box()  # read without scrolling: the page opens on it
            assert box is not None and box["y"] + box["height"] <= LAPTOP["height"], box
            shown(page, "raise the stream's max_age before then")
            value, element = tile(page, "Time to loss")
            assert re.fullmatch(r"~\d+.*", value), value  # a projection; nothing was removed yet
            in_view(page, element)
            assert element.evaluate("e => e.scrollWidth <= e.clientWidth"), f"the tile cuts {value!r}"
            no_errors(page)

            # 2. The poison message: its stream sequence in the Dropped messages table, and the line.
            page.goto(f"{base}/consumer?stream={poison}&consumer=orders")
            shown(page, re.compile(r"^1 message this consumer dropped unprocessed since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC .*newest first: "
                                   r"1 max_deliver reached\.$"))
            dropped = wait_until(lambda: grid_with(page, "Stream seq"), timeout=WAIT,
                                 message="the Dropped messages table drawn")
            assert (dropped["Stream seq"], dropped["Subject"], dropped["Deliveries"], dropped["Reason"]) == (
                "2", f"{sub}.poison.order.42", "3", "max_deliver reached"), dropped
            line = shown(page, f"nats stream get {poison} 2")
            in_view(page, line)
            no_errors(page)

            # 3. The configuration that cannot work: its title, numbers and fix, beside the verdict.
            page.goto(f"{base}/consumer?stream={short}&consumer=c")
            shown(page, "Configuration findings (beside the verdict, not part of it)")
            finding = page.locator("li").filter(has_text="ack_wait shorter than the work").filter(visible=True).first
            finding.wait_for(timeout=WAIT * 1000)
            words = finding.inner_text()
            assert "ack_wait is 1 s, and messages were redelivered while the consumer kept acknowledging" in words, \
                words
            assert "Fix: raise ack_wait above the longest processing time, or have the workers send +WPI" in words, \
                words
            in_view(page, finding)
            no_errors(page)
            page.close()
    finally:
        async def wind_down() -> None:
            feeding.set()
            for c in clients:
                await c.stop()
            for nc in conn:
                await nc.close()

        loop.call(wind_down())
        loop.close()
