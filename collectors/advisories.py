"""Consumer advisories: durable capture through a JetStream stream, or a core fallback.

The server publishes an advisory only to whoever listens at that moment, so a plain
subscription loses every pin switch that happens while the collector is down. A capped stream
on the advisory subjects keeps them; the collector reads it with a durable consumer and acks a
batch only after its rows are committed, and the store keeps one row per advisory `id`, so a
crash between commit and ack costs a redelivery, never a loss or a duplicate.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg

from jetwatch.core.jsapi import JetStreamAPI, JetStreamAPIError, NoReply, StreamNotFound

log = logging.getLogger("jetwatch.advisories")

ADVISORY_PREFIX = "$JS.EVENT.ADVISORY.CONSUMER."
CAPTURED = (
    "PINNED", "UNPINNED", "MAX_DELIVERIES", "MSG_NAKED", "MSG_TERMINATED", "CREATED", "DELETED",
    "PAUSE", "LEADER_ELECTED", "QUORUM_LOST",
)
SUBJECTS = tuple(f"{ADVISORY_PREFIX}{name}.>" for name in CAPTURED)
TYPE_PREFIX = "io.nats.jetstream.advisory.v1."
ADVISORY_COLUMNS = ("id", "ts", "received_at", "kind", "subject", "account", "stream", "consumer",
                    "group_name", "pinned_id", "reason", "raw")


class MalformedAdvisory(ValueError):
    pass


def parse_advisory(subject: str, data: bytes, account: str, received_at: str) -> dict[str, Any]:
    """One advisory as a row; raises MalformedAdvisory for anything the store cannot key."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedAdvisory(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise MalformedAdvisory("not a JSON object")
    kind = str(doc.get("type", ""))
    if not kind.startswith(TYPE_PREFIX):
        raise MalformedAdvisory(f"unknown advisory type {kind!r}")
    if not isinstance(doc.get("id"), str) or not doc["id"]:
        raise MalformedAdvisory("advisory without an id")
    if not isinstance(doc.get("timestamp"), str):
        raise MalformedAdvisory("advisory without a timestamp")
    kind = kind[len(TYPE_PREFIX):]
    if kind in ("consumer_group_pinned", "consumer_group_unpinned"):
        for key in ("stream", "consumer"):
            if not isinstance(doc.get(key), str):
                raise MalformedAdvisory(f"{kind} advisory without {key}")
        if kind == "consumer_group_pinned" and not isinstance(doc.get("pinned_id"), str):
            raise MalformedAdvisory("pinned advisory without pinned_id")
    return {
        "id": doc["id"], "ts": doc["timestamp"], "received_at": received_at, "kind": kind,
        "subject": subject, "account": doc.get("account") or account, "stream": doc.get("stream"),
        "consumer": doc.get("consumer"), "group_name": doc.get("group"),
        "pinned_id": doc.get("pinned_id"), "reason": doc.get("reason"), "raw": json.dumps(doc),
    }


@dataclass
class Fetched:
    """A batch of advisories read but not yet acknowledged."""

    messages: list[tuple[str, bytes]] = field(default_factory=list)
    to_ack: list[Msg] = field(default_factory=list)


class Capture(Protocol):
    mode: str

    async def fetch(self) -> Fetched: ...
    async def ack(self, fetched: Fetched) -> None: ...
    async def backlog(self) -> int | None: ...
    async def close(self) -> None: ...


def capture_stream_config(name: str, max_age_s: float, max_bytes: int) -> dict[str, Any]:
    return {
        "name": name, "subjects": list(SUBJECTS), "retention": "limits", "storage": "file",
        "discard": "old", "max_age": int(max_age_s * 1e9), "max_bytes": max_bytes,
        "num_replicas": 1, "duplicate_window": int(min(max_age_s, 120) * 1e9),
        "description": "jetwatch: durable capture of consumer advisories",
    }


async def ensure_capture_stream(api: JetStreamAPI, name: str, max_age_s: float, max_bytes: int) -> bool:
    """Create the capture stream if missing; True if it exists afterwards."""
    try:
        await api.stream_info(name)
        return True
    except StreamNotFound:
        pass
    try:
        await api.add_stream(capture_stream_config(name, max_age_s, max_bytes))
        log.info("created capture stream %s", name)
        return True
    except (JetStreamAPIError, NoReply) as exc:
        log.warning("cannot create capture stream %s: %s", name, exc)
        return False


class DurableCapture:
    """Reads the capture stream with a durable pull consumer."""

    mode = "durable"

    def __init__(self, nc: Client, api: JetStreamAPI, stream: str, durable: str,
                 forget_after_s: float, batch: int = 256, wait: float = 0.5):
        self.nc, self.api, self.stream, self.durable = nc, api, stream, durable
        self.forget_after_s, self.batch, self.wait = forget_after_s, batch, wait
        self._sub: Any = None

    async def open(self) -> None:
        await self.api.add_consumer(self.stream, {
            "durable_name": self.durable, "ack_policy": "explicit", "deliver_policy": "all",
            "ack_wait": 5_000_000_000, "max_ack_pending": 10_000, "max_waiting": 16,
            "inactive_threshold": int(self.forget_after_s * 1e9),
            "description": "jetwatch collector: advisories not yet in its store",
        })
        js = self.nc.jetstream(timeout=self.api.timeout)
        self._sub = await js.pull_subscribe_bind(self.durable, self.stream)

    async def fetch(self) -> Fetched:
        try:
            msgs = await self._sub.fetch(self.batch, timeout=self.wait)
        except (nats.errors.TimeoutError, asyncio.TimeoutError):
            return Fetched()
        return Fetched([(m.subject, m.data) for m in msgs], msgs)

    async def ack(self, fetched: Fetched) -> None:
        # One ack per message: an AckAll for this batch would also ack messages that a killed
        # predecessor received and never stored, and they would never be redelivered.
        for msg in fetched.to_ack:
            await self.nc.publish(msg.reply, b"+ACK")
        await self.nc.flush()

    async def backlog(self) -> int | None:
        """Advisories stored but not yet acknowledged; 0 means the store has them all."""
        info = await self.api.consumer_info(self.stream, self.durable)
        return int(info.get("num_pending", 0)) + int(info.get("num_ack_pending", 0))

    async def close(self) -> None:
        if self._sub is not None:
            await self._sub.unsubscribe()


class CoreCapture:
    """Fallback when no capture stream can exist: loses what happens while disconnected."""

    mode = "core"

    def __init__(self, nc: Client, wait: float = 0.5):
        self.nc, self.wait = nc, wait
        self._buffer: list[tuple[str, bytes]] = []
        self._arrived = asyncio.Event()
        self._subs: list[Any] = []

    async def open(self) -> None:
        async def handler(msg: Msg) -> None:
            self._buffer.append((msg.subject, msg.data))
            self._arrived.set()

        for subject in SUBJECTS:
            self._subs.append(await self.nc.subscribe(subject, cb=handler))

    async def fetch(self) -> Fetched:
        if not self._buffer:
            try:
                await asyncio.wait_for(self._arrived.wait(), self.wait)
            except asyncio.TimeoutError:
                pass
        self._arrived.clear()
        taken, self._buffer = self._buffer, []
        return Fetched(taken)

    async def ack(self, fetched: Fetched) -> None:
        return None

    async def backlog(self) -> int | None:
        return 0

    async def close(self) -> None:
        for sub in self._subs:
            await sub.unsubscribe()
