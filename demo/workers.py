"""Pull workers that speak ADR-42 priority groups with raw pull requests.

nats-py has no priority-group pull options, so a worker publishes the pull request JSON itself:
it sends `group` (and `id` once pinned), keeps the `Nats-Pin-Id` of the first message the server
pins it with, and drops the id on a 423 status. The demo workload and the tests use these same
workers, so the tests exercise the pin protocol as real clients do.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg

from jetwatch.core.pin_announce import PinAnnouncer
from jetwatch.core.pull_announce import PullAnnouncer

log = logging.getLogger("jetwatch.demo.worker")


def ack_counts(reply: str) -> tuple[int | None, int | None]:
    """(delivery count, stream sequence) from a `$JS.ACK` reply subject, v1 or v2 layout."""
    parts = reply.split(".")
    if len(parts) == 9:
        return int(parts[4]), int(parts[5])
    if len(parts) >= 11:
        return int(parts[6]), int(parts[7])
    return None, None


@dataclass
class WorkerStats:
    pulls: int = 0  # pull requests sent
    received: int = 0
    acked: int = 0
    redelivered: int = 0
    pins: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    stream_seqs: list[int] = field(default_factory=list)


class PullWorker:
    """One client of a pull consumer. `stalled` stops pulling at once (what the server still
    delivers to the pull under way is left unread, as a client that hangs leaves it);
    `winding_down` stops asking but reads the pull under way to its end, as a client that shuts
    down cleanly does; `acking` off keeps work in flight."""

    def __init__(self, nc: Client, stream: str, consumer: str, group: str | None = None,
                 name: str = "worker", batch: int = 10, expires_s: float = 1.0,
                 min_pending: int | None = None, priority: int | None = None,
                 work_s: float = 0.0, between_s: float = 0.0, announcer: PinAnnouncer | None = None,
                 min_ack_pending: int | None = None, pull_announcer: PullAnnouncer | None = None):
        self.nc, self.stream, self.consumer, self.group, self.name = nc, stream, consumer, group, name
        self.batch, self.expires_s, self.work_s, self.between_s = batch, expires_s, work_s, between_s
        self.min_pending, self.min_ack_pending, self.priority = min_pending, min_ack_pending, priority
        self.announcer = announcer  # says who holds each new pin
        self.pull_announcer = pull_announcer  # says what it pulls with
        self.pin_id: str | None = None
        self.stalled = False
        self.winding_down = False
        self.pulling = False  # a pull request is under way (the server may still deliver to it)
        self.acking = True
        self.stats = WorkerStats()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._unacked: list[Msg] = []

    def pull_request(self) -> dict[str, Any]:
        req: dict[str, Any] = {"batch": self.batch, "expires": int(self.expires_s * 1e9)}
        if self.group:
            req["group"] = self.group
            if self.pin_id:
                req["id"] = self.pin_id
        if self.min_pending is not None:
            req["min_pending"] = self.min_pending
        if self.min_ack_pending is not None:
            req["min_ack_pending"] = self.min_ack_pending
        if self.priority is not None:
            req["priority"] = self.priority
        return req

    async def _handle(self, msg: Msg) -> bool:
        """Process one message of a pull; returns True when the pull is over."""
        status = (msg.headers or {}).get("Status")
        if status:
            self.stats.statuses.append(status)
            if status == "423":
                self.pin_id = None  # lost the pin: pull without an id from now on
            return status != "100"
        pin = (msg.headers or {}).get("Nats-Pin-Id")
        if pin and pin != self.pin_id:
            self.pin_id = pin
            self.stats.pins.append(pin)
        if self.announcer is not None:
            await self.announcer.saw(msg)
        self.stats.received += 1
        delivered, stream_seq = ack_counts(msg.reply or "")
        if stream_seq is not None:
            self.stats.stream_seqs.append(stream_seq)
        if delivered and delivered > 1:
            self.stats.redelivered += 1
        await self.finish(msg)
        return False

    async def finish(self, msg: Msg) -> None:
        """Work one message and answer it: acknowledged, or held while `acking` is off. A client
        that answers otherwise (a nak, progress, acks in bulk) overrides this."""
        if self.work_s:
            await asyncio.sleep(self.work_s)
        if self.acking:
            await self.nc.publish(msg.reply, b"+ACK")
            self.stats.acked += 1
        else:
            self._unacked.append(msg)

    async def pull_once(self) -> None:
        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox)
        try:
            request = self.pull_request()
            if self.pull_announcer is not None:
                await self.pull_announcer.pulling(request)
            self.stats.pulls += 1
            await self.nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{self.stream}.{self.consumer}",
                                  json.dumps(request).encode(), reply=inbox)
            got = 0
            deadline = asyncio.get_running_loop().time() + self.expires_s + 1.0
            self.pulling = True
            while got < self.batch and not self.stalled and not self._stopping:
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    break
                try:
                    msg = await sub.next_msg(timeout=remaining)
                except TimeoutError:
                    break
                except Exception:  # nats TimeoutError and connection errors end this pull
                    break
                if await self._handle(msg):
                    break
                got += 1
        finally:
            self.pulling = False
            await sub.unsubscribe()

    async def run(self) -> None:
        while not self._stopping:
            if self.stalled or self.winding_down or not self.nc.is_connected:
                await asyncio.sleep(0.1)
                continue
            try:
                await self.pull_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("%s pull failed: %s", self.name, exc)
                await asyncio.sleep(0.2)
            if self.between_s:
                await asyncio.sleep(self.between_s)

    def start(self) -> PullWorker:
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(self.run(), name=self.name)
        return self

    async def stop(self, timeout: float = 10.0) -> None:
        """End the pull loop, waiting at most `timeout` seconds. A cancel alone is not enough on
        Python 3.11: nats-py's `next_msg` waits in `asyncio.wait_for`, which returns the message
        instead of raising when the cancel lands as one arrives, and the loop then pulled on while
        this method waited for it for ever. The flag ends the loop after the pull under way."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping = True
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            raise RuntimeError(f"pull worker {self.name} did not stop within {timeout:g}s")
        if not task.cancelled():
            task.exception()  # retrieved: a pull that failed as it was stopped is not news

    async def ack_held(self) -> int:
        """Acknowledge the work held back while `acking` was off."""
        held, self._unacked = self._unacked, []
        for msg in held:
            await self.nc.publish(msg.reply, b"+ACK")
        self.stats.acked += len(held)
        return len(held)
