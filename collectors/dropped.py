"""Dropped messages: what each message a consumer gave up on was, read once while the stream has it.

The MAX_DELIVERIES and MSG_TERMINATED advisories name a dropped message by its stream sequence only
(neither carries its subject or time), and the stream may remove it soon after (limits, interest, an
operator). So when such an advisory is stored, the collector reads the message itself: with
`$JS.API.DIRECT.GET.<stream>` where the stream allows direct get, else `$JS.API.STREAM.MSG.GET.<stream>`,
always `{"seq": N}` (this exact message, not the next one), and keeps its subject and stored time,
or that it is gone. Each read happens once; a refused one is tried again after `retry_refused`
seconds. Bounded: at most `per_pass` reads a pass, the newest drops first; the rest wait for the next.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import nats.errors
from nats.aio.client import Client

from jetwatch.collectors.store_write import StoreWrite
from jetwatch.core.advisory_row import AdvisoryRow
from jetwatch.core.clock import parse_rfc3339, rfc3339
from jetwatch.core.jsapi import InvalidName, JetStreamAPI, JetStreamAPIError, NoReply, StreamNotFound, check_name
from jetwatch.core.jsinfo import StreamInfo
from jetwatch.store import writes

log = logging.getLogger("jetwatch.dropped")

DROPPED_KINDS = ("max_deliver", "terminated")  # advisory kinds (their type's suffix) that drop a message
FOUND, GONE, REFUSED = "found", "gone", "refused"
ERR_NO_MESSAGE = 10037  # STREAM.MSG.GET: no message found
T = TypeVar("T")


@dataclass(frozen=True)
class MessageRead:
    """What one read of a dropped message found."""

    stream: str
    stream_seq: int
    state: str  # found, gone, refused
    subject: str | None = None
    stored_at: dt.datetime | None = None
    note: str | None = None

    def row(self, account: str, read_at: dt.datetime) -> dict[str, Any]:
        return {"account": account, "stream": self.stream, "stream_seq": self.stream_seq, "state": self.state,
                "subject": self.subject, "stored_at": rfc3339(self.stored_at) if self.stored_at else None,
                "note": self.note, "read_at": rfc3339(read_at)}


def drops_in(rows: Sequence[AdvisoryRow]) -> bool:
    """Whether a batch of stored advisories dropped any message (then there is something to read)."""
    return any(r["kind"] in DROPPED_KINDS for r in rows)


def parse_direct(stream: str, seq: int, headers: dict[str, str] | None) -> MessageRead:
    """A direct get's reply: the message's headers, or a status (404: not in the stream)."""
    headers = headers or {}
    status = headers.get("Status")
    if status == "404":
        return MessageRead(stream, seq, GONE, note=f"stream {stream} no longer has message {seq}")
    if status or "Nats-Time-Stamp" not in headers:
        return MessageRead(stream, seq, REFUSED, note=f"direct get answered {status or 'without a timestamp'} "
                                                      f"{headers.get('Description', '')}".strip())
    return MessageRead(stream, seq, FOUND, headers.get("Nats-Subject"), parse_rfc3339(headers["Nats-Time-Stamp"]))


def parse_msg_get(stream: str, seq: int, data: bytes) -> MessageRead:
    """A STREAM.MSG.GET reply: the message, or the server's refusal (no message: gone)."""
    reply = json.loads(data)
    err = reply.get("error")
    if err:
        if err.get("err_code") == ERR_NO_MESSAGE or err.get("code") == 404:
            return MessageRead(stream, seq, GONE, note=f"stream {stream} no longer has message {seq}")
        return MessageRead(stream, seq, REFUSED, note=f"{err.get('description', 'refused')} (error {err.get('err_code')})")
    message = reply.get("message") or {}
    return MessageRead(stream, seq, FOUND, message.get("subject"), parse_rfc3339(message["time"]))


class DroppedReader:
    """Reads the messages behind stored MAX_DELIVERIES and MSG_TERMINATED advisories of one account."""

    def __init__(self, nc: Client, account: str, write: StoreWrite, clock: Callable[[], dt.datetime], *,
                 per_pass: int = 32, timeout: float = 2.0, retry_refused: float = 300.0):
        self.nc, self.account, self.write, self.clock = nc, account, write, clock
        self.api = JetStreamAPI(nc, timeout=timeout)
        self.per_pass, self.timeout, self.retry_refused = per_pass, timeout, retry_refused
        self.more = True  # reads may be waiting (at start: whatever an earlier run left unread)

    async def read_pending(self) -> list[MessageRead]:
        """One pass: at most `per_pass` unread drops, read concurrently and stored together."""
        now = self.clock()
        todo = await self.write(lambda con: writes.dropped_unread(
            con, self.account, self.per_pass, now - dt.timedelta(seconds=self.retry_refused)))
        self.more = len(todo) >= self.per_pass
        if not todo:
            return []
        allow = {stream: await self._allow_direct(stream) for stream in {s for s, _ in todo}}
        reads = list(await asyncio.gather(*(self.read_one(stream, seq, allow[stream]) for stream, seq in todo)))
        read_at = self.clock()
        await self.write(lambda con: writes.write_dropped_reads(con, [r.row(self.account, read_at) for r in reads]))
        for r in reads:
            if r.state == REFUSED:
                log.warning("reading dropped message %s of stream %s: %s; may the collector's user publish to "
                            "$JS.API.DIRECT.GET.%s or $JS.API.STREAM.MSG.GET.%s?", r.stream_seq, r.stream, r.note,
                            r.stream, r.stream)
        return reads

    async def _allow_direct(self, stream: str) -> bool | None:
        """The stream's allow_direct; None when the stream is gone (its messages with it)."""
        try:
            info = await self.api.stream_info(check_name("stream", stream))
        except StreamNotFound:
            return None
        except (InvalidName, JetStreamAPIError, NoReply) as exc:  # no stream info: STREAM.MSG.GET may still answer
            log.info("stream info of %s for dropped messages: %s", stream, exc)
            return False
        return StreamInfo.of(info).settings.allow_direct

    async def read_one(self, stream: str, seq: int, allow_direct: bool | None) -> MessageRead:
        """The message at exactly `seq` (never the next one: that would be another message)."""
        if allow_direct is None:
            return MessageRead(stream, seq, GONE, note=f"stream {stream} no longer exists")
        try:
            check_name("stream", stream)
        except InvalidName:  # a forged advisory's name: nothing the server could be asked for
            return MessageRead(stream, seq, REFUSED, note="not a stream name that can be read")
        api = f"$JS.API.{'DIRECT.GET' if allow_direct else 'STREAM.MSG.GET'}.{stream}"
        try:
            msg = await self.nc.request(api, json.dumps({"seq": seq}).encode(), timeout=self.timeout)
        except (TimeoutError, nats.errors.TimeoutError):
            return MessageRead(stream, seq, REFUSED, note=f"no reply to {api} within {self.timeout:g}s")
        except nats.errors.NoRespondersError:
            return MessageRead(stream, seq, REFUSED, note=f"nobody answered {api}")
        try:
            return parse_direct(stream, seq, msg.headers) if allow_direct else parse_msg_get(stream, seq, msg.data)
        except (ValueError, KeyError, TypeError) as exc:
            return MessageRead(stream, seq, REFUSED, note=f"unreadable reply to {api}: {exc}")
