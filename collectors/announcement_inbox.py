"""What workers announce (who holds a pin, the settings they pull with) arrives on a plain
subscription and waits in a bounded queue for its handler, which checks each against CONNZ and
stores it: the subscription's callback never waits on CONNZ or the store, and announcements that
arrive faster than they are checked are dropped, not queued without end.

Anyone who may publish on the announce subjects could otherwise fill the store and the log: each
origin (the connection an announcement names: server id and client id) may have
`PER_ORIGIN_PER_MINUTE` announcements checked and stored a minute, and all origins together
`IN_ALL_PER_MINUTE` (a forger can name as many connections as it likes); beyond that they are only
counted. Whatever was dropped or refused is said in one log line per `SUMMARY_EVERY` seconds, with
how many and why, never a line per announcement.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg

log = logging.getLogger("jetwatch.announcements")

QUEUED = 1000  # announcements waiting to be checked, at most
# A worker announces its pull settings once a minute per consumer and its holder once per pin:
# a connection with a few dozen consumers stays well within these.
PER_ORIGIN_PER_MINUTE = 60
IN_ALL_PER_MINUTE = 600
SUMMARY_EVERY = 60.0  # seconds between the log lines that count what was dropped
REMEMBERED_ORIGINS = 10_000  # origins counted in a minute, at most: the rest share one count
REASONS = 50  # distinct reasons counted between summaries, at most: the rest are "other reasons"


class AnnouncementBudget:
    """Per origin and in all, how many announcements a minute may be checked and stored."""

    def __init__(self, per_origin: int = PER_ORIGIN_PER_MINUTE, in_all: int = IN_ALL_PER_MINUTE,
                 clock: Callable[[], float] = time.monotonic):
        self.per_origin, self.in_all, self.clock = per_origin, in_all, clock
        self._start = clock()
        self._kept: Counter[str] = Counter()

    def admit(self, origin: str) -> bool:
        now = self.clock()
        if now - self._start >= 60.0:
            self._start, self._kept = now, Counter()
        if len(self._kept) >= REMEMBERED_ORIGINS and origin not in self._kept:
            origin = "(others)"
        if self._kept[origin] >= self.per_origin or self._kept.total() >= self.in_all:
            return False
        self._kept[origin] += 1
        return True


def origin_of(server_id: str | None, client_id: int | None) -> str:
    """The connection an announcement names, as the budget counts it."""
    return f"connection {client_id} on server {server_id}" if client_id is not None else "no connection named"


class AnnouncementInbox:
    """One subscription to `subjects`, its messages handed one at a time to a handler by `run`;
    `what` names them in the log ("pin announcement"). Handlers ask `admit` before checking an
    announcement and `drop` what they refuse; `run` logs the counts once per SUMMARY_EVERY."""

    def __init__(self, nc: Client, subjects: str, what: str, budget: AnnouncementBudget | None = None) -> None:
        self.nc, self.subjects, self.what = nc, subjects, what
        self.budget = budget or AnnouncementBudget()
        self.handled = 0  # announcements handed to the handler (admitted or not)
        self.dropped: Counter[str] = Counter()  # why, since the last summary
        self._origins: Counter[str] = Counter()  # whose, of those over the budget since the last summary
        self._queue: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue(maxsize=QUEUED)
        self._sub: Any = None
        self._said = time.monotonic()

    async def open(self) -> None:
        async def arrived(msg: Msg) -> None:
            try:
                self._queue.put_nowait((msg.subject, msg.data))
            except asyncio.QueueFull:
                self.drop("arrived faster than they are checked")

        self._sub = await self.nc.subscribe(self.subjects, cb=arrived)

    def admit(self, origin: str) -> bool:
        """Whether an announcement naming `origin` fits the budget; counted as dropped if not."""
        if self.budget.admit(origin):
            return True
        self.drop(f"over the budget of {self.budget.per_origin} a minute per connection and "
                  f"{self.budget.in_all} in all")
        if len(self._origins) < REMEMBERED_ORIGINS or origin in self._origins:
            self._origins[origin] += 1
        return False

    def drop(self, why: str) -> None:
        """Count one announcement not stored, for the next summary line."""
        why = why[:200]
        if len(self.dropped) >= REASONS and why not in self.dropped:
            why = "for other reasons"
        self.dropped[why] += 1

    def summarize(self, force: bool = False) -> None:
        """One log line for what was dropped since the last, once SUMMARY_EVERY has passed."""
        now = time.monotonic()
        if not self.dropped or (not force and now - self._said < SUMMARY_EVERY):
            return
        whys = "; ".join(f"{n} {why}" for why, n in self.dropped.most_common(5))
        most = self._origins.most_common(1)
        log.warning("%d %ss not stored in the last %.0f s: %s%s", self.dropped.total(), self.what, now - self._said,
                    whys, f" (most from {most[0][0]}: {most[0][1]})" if most else "")
        self.dropped, self._origins, self._said = Counter(), Counter(), now

    async def run(self, stop: asyncio.Event, handle: Callable[[str, bytes], Awaitable[Any]]) -> None:
        try:
            while not stop.is_set():
                self.summarize()
                try:
                    subject, data = await asyncio.wait_for(self._queue.get(), 0.5)
                except TimeoutError:
                    continue
                try:
                    await handle(subject, data)
                except Exception as exc:  # one announcement's failure never stops the others
                    self.drop(f"not stored: {type(exc).__name__}: {exc}")
                self.handled += 1
        finally:
            self.summarize(force=True)

    async def close(self) -> None:
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception as exc:  # the connection may be gone: nothing to release
                log.info("closing the %s subscription: %s", self.what, exc)
            self._sub = None
