"""What workers announce (who holds a pin, the settings they pull with) arrives on a plain
subscription and waits in a bounded queue for its handler, which checks each against CONNZ and
stores it: the subscription's callback never waits on CONNZ or the store, and announcements that
arrive faster than they are checked are dropped with a word in the log, not queued without end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg

log = logging.getLogger("jetwatch.announcements")

QUEUED = 1000  # announcements waiting to be checked, at most


class AnnouncementInbox:
    """One subscription to `subjects`, its messages handed one at a time to a handler by `run`;
    `what` names them in the log ("pin announcement")."""

    def __init__(self, nc: Client, subjects: str, what: str) -> None:
        self.nc, self.subjects, self.what = nc, subjects, what
        self._queue: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue(maxsize=QUEUED)
        self._sub: Any = None

    async def open(self) -> None:
        async def arrived(msg: Msg) -> None:
            try:
                self._queue.put_nowait((msg.subject, msg.data))
            except asyncio.QueueFull:
                log.warning("%ss arrive faster than they are checked: one on %s dropped", self.what, msg.subject)

        self._sub = await self.nc.subscribe(self.subjects, cb=arrived)

    async def run(self, stop: asyncio.Event, handle: Callable[[str, bytes], Awaitable[Any]]) -> None:
        while not stop.is_set():
            try:
                subject, data = await asyncio.wait_for(self._queue.get(), 0.5)
            except TimeoutError:
                continue
            try:
                await handle(subject, data)
            except Exception as exc:  # one announcement's failure never stops the others
                log.warning("a %s on %.200s was not stored: %s", self.what, subject, exc)

    async def close(self) -> None:
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception as exc:  # the connection may be gone: nothing to release
                log.info("closing the %s subscription: %s", self.what, exc)
            self._sub = None
