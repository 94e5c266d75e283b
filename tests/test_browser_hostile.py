"""What a hostile user of the account can put on the dashboard's pages through the worker
announcements, in headless Chromium: text, never a link, an image or a request elsewhere.

Anyone who may publish on the account can announce the holder of a pin (pin ids are public: they
are in advisories, /metrics and the pages). Every announced field reaches the pages as text; a
page that rendered one as Markdown would load an image from the attacker's host (a beacon that
learns the dashboard's address) and draw a link of the attacker's choosing."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any
from urllib.parse import urlsplit

import nats
import pytest
from nats.aio.client import Client

from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.core.pin_announce import Announcement, PinAnnouncer
from jetwatch.dashboard.ui import WORD_JOINER
from jetwatch.demo.workers import PullWorker
from jetwatch.store.database import Store
from tests.browser import no_errors, own_site
from tests.helpers import LoopThread, eventually, make_consumer, make_stream, publish, rows, wait_until
from tests.loopback import LoopbackServer

pytestmark = [pytest.mark.browser]


class Beacon(LoopbackServer):
    """The attacker's image host, on loopback: counts what reaches it."""

    def __init__(self) -> None:
        super().__init__()
        self.hits = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.hits += 1
        writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()


class HostileAnnouncer(PinAnnouncer):
    """A worker whose announcement carries Markdown in its version and host."""

    def __init__(self, *args: Any, version: str, host: str, **kwargs: Any) -> None:
        super().__init__(*args, version=version, **kwargs)
        self.host = host

    def announcement(self, pin_id: str) -> Announcement:
        return dataclasses.replace(super().announcement(pin_id), host=self.host)


def test_markup_in_a_pin_announcement_is_text_on_every_page_and_no_page_asks_another_host(nats_server, chromium, uid,
                                                                                          tmp_path):
    stream, consumer, subject = f"{uid}_HOSTILE", "work", f"{uid.lower()}.hostile.x"
    loop = LoopThread()  # the worker runs while the browser blocks this thread
    worker: PullWorker | None = None
    nc: Client | None = None
    with Beacon() as beacon:
        image = f"![b](http://127.0.0.1:{beacon.port}/beacon.png)"
        version = f"1.0 {image} [Session expired: sign in again](http://evil.example/login)"
        host = f"<img src=http://127.0.0.1:{beacon.port}/host.png> **host**"

        async def pinned_worker() -> tuple[Client, PullWorker, str]:
            conn = await nats.connect(nats_server.url, name="worker-x")
            api = JetStreamAPI(conn)
            await make_stream(api, stream, [f"{uid.lower()}.hostile.>"])
            await make_consumer(api, stream, consumer, "pinned_client", timeout_s=30)
            w = PullWorker(conn, stream, consumer, group="jobs", name="worker-x",
                           announcer=HostileAnnouncer(conn, stream, consumer, group="jobs", version=version,
                                                      host=host)).start()
            await publish(conn, subject, 5)
            return conn, w, await eventually(lambda: w.pin_id, timeout=30, message="the worker pinned")

        def announced(store: Store) -> None:
            nonlocal nc, worker
            nc, worker, pin = loop.call(pinned_worker())
            wait_until(lambda: rows(store, "SELECT version, host FROM pin_holders WHERE pin_id = ?", [pin])
                       == [(version, host)], timeout=30, message="the hostile announcement stored as sent")

        try:
            with own_site(nats_server.url, tmp_path, stream, "--interval", "0.5s", "--monitor-url",
                          nats_server.monitor_url, before_dashboard=announced) as (base, _):
                own = urlsplit(base).netloc
                context = chromium.new_context(viewport={"width": 1280, "height": 800})
                asked: list[str] = []
                context.on("request", lambda request: asked.append(request.url))
                page = context.new_page()

                page.goto(f"{base}/consumer?stream={stream}&consumer={consumer}")
                tile = page.locator('[data-testid="stColumn"]').filter(
                    has=page.locator('[data-testid="stMetricLabel"]', has_text="Pin holder"))
                tile.locator('[data-testid="stTooltipHoverTarget"]').first.wait_for(timeout=30_000)
                tile.locator('[data-testid="stTooltipHoverTarget"]').first.hover()
                said = page.get_by_text("Announced by worker-x").filter(visible=True).first
                said.wait_for(timeout=30_000)
                # The announcement reads as sent, as text: its link and image are characters, not elements
                # (a word joiner, which shows as nothing, keeps a bare address from becoming a link).
                text = said.inner_text().replace(WORD_JOINER, "")
                assert version in text and host in text, text
                assert page.locator('a[href*="evil.example"]').count() == 0
                assert page.locator(f'img[src*="{beacon.port}"]').count() == 0
                no_errors(page)
                for path in ("/", f"/pins?search={stream}", "/audit"):
                    page.goto(base + path)
                    page.locator('[data-testid="stMain"]').wait_for(timeout=30_000)
                    page.wait_for_load_state("networkidle")
                    no_errors(page)
                context.close()
                assert asked and {urlsplit(url).netloc for url in asked if not url.startswith("data:")} == {own}, \
                    sorted(set(asked))
                assert beacon.hits == 0
        finally:
            if worker is not None:
                loop.call(worker.stop())
            if nc is not None:
                loop.call(nc.close())
            loop.close()
