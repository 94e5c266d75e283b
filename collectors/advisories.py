"""Consumer advisories: durable capture through a JetStream stream, or a core fallback.

The server publishes an advisory only to whoever listens at that moment, so a plain
subscription loses every pin switch that happens while the collector is down. A capped stream
on the advisory subjects keeps them; the collector reads it with a durable consumer and acks a
batch only after its rows are committed, and the store keeps one row per advisory `id`, so a
crash between commit and ack costs a redelivery, never a loss or a duplicate.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg

from jetwatch.core.advisory_row import AdvisoryRow
from jetwatch.core.clock import parse_rfc3339, rfc3339
from jetwatch.core.jsadvisory import OPTIONAL_COUNTS, OPTIONAL_TEXT, PINNED, TYPE_PREFIX, UNPINNED, Advisory
from jetwatch.core.jsapi import ConsumerNotFound, JetStreamAPI, JetStreamAPIError, NoReply, StreamNotFound
from jetwatch.core.jsinfo import ConsumerInfo, StreamConfig, StreamInfo
from jetwatch.core.text import storable

log = logging.getLogger("jetwatch.advisories")

ADVISORY_PREFIX = "$JS.EVENT.ADVISORY.CONSUMER."
CAPTURED = (
    "PINNED", "UNPINNED", "MAX_DELIVERIES", "MSG_NAKED", "MSG_TERMINATED", "CREATED", "DELETED",
    "PAUSE", "LEADER_ELECTED", "QUORUM_LOST",
)
SUBJECTS = tuple(f"{ADVISORY_PREFIX}{name}.>" for name in CAPTURED)
ADVISORY_COLUMNS = ("id", "ts", "received_at", "kind", "subject", "account", "stream", "consumer",
                    "group_name", "pinned_id", "reason", "raw")


class MalformedAdvisory(ValueError):
    pass


# The pin advisories' subjects and types go together: a pin event on the other's subject is forged.
PIN_KINDS = {"PINNED": PINNED, "UNPINNED": UNPINNED}
# What an advisory may store. The server's are a few hundred bytes and its names at most 255
# characters; anything larger was written by someone else, and stored it would grow the store with
# every copy. Past a bound the advisory is rejected whole (into `rejects`, raw cut to 4 KiB), never
# cut and stored: a cut name would be another consumer's.
MAX_ADVISORY_BYTES = 16 * 1024
NAME_CHARS = 256  # account, stream, consumer, group, pinned_id, domain, leader, action
FIELD_CHARS = {"reason": 1024}  # an unpin's or a termination's reason (a client may write the latter)


def _fail(why: str) -> MalformedAdvisory:
    return MalformedAdvisory(why)


def _check_envelope(doc: dict[str, object]) -> dt.datetime:
    """The fields every advisory has: its type, id and time (returned)."""
    kind = doc.get("type")
    if not isinstance(kind, str) or not kind.startswith(TYPE_PREFIX):
        raise _fail(f"unknown advisory type {kind!r:.80}")
    ident = doc.get("id")
    if not isinstance(ident, str) or not ident:
        raise _fail("advisory without an id")
    if len(ident) > 128:
        raise _fail("advisory id longer than 128 characters")
    if "timestamp" not in doc:
        raise _fail("advisory without a timestamp")
    try:
        return parse_rfc3339(doc["timestamp"])
    except ValueError as exc:
        raise _fail(f"timestamp: {exc}") from None


def _check_fields(doc: dict[str, object]) -> None:
    """The optional fields, each of its type in Advisory and within its bound."""
    for key in OPTIONAL_TEXT:
        value = doc.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise _fail(f"{key} is {type(value).__name__} {value!r:.40}, expected a string")
        limit = FIELD_CHARS.get(key, NAME_CHARS)
        if len(value) > limit:
            raise _fail(f"{key} is {len(value)} characters, more than the {limit} an advisory field may hold")
    for key in OPTIONAL_COUNTS:
        value = doc.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise _fail(f"{key} is {type(value).__name__} {value!r:.40}, expected an integer")


def _check_pin(subject: str, advisory: Advisory) -> None:
    """A pin advisory names its consumer (and a PINNED its pin), and arrived on that consumer's subject."""
    kind = advisory.kind
    if kind not in PIN_KINDS.values():
        return
    for key, value in (("stream", advisory.stream), ("consumer", advisory.consumer)):
        if not value:
            raise _fail(f"{kind} advisory without {key}")
    if kind == PINNED and not advisory.pinned_id:
        raise _fail("pinned advisory without pinned_id")
    expected = next(token for token, k in PIN_KINDS.items() if k == kind)
    if subject != f"{ADVISORY_PREFIX}{expected}.{advisory.stream}.{advisory.consumer}":
        raise _fail(f"{kind} advisory for {advisory.stream}/{advisory.consumer} arrived on {subject!r:.200}")


def validate_advisory(subject: str, doc: object) -> tuple[Advisory, dt.datetime]:
    """Check, field by field, everything of an advisory the store keeps or pin history reads;
    returns it typed, and its time. One bad advisory is rejected alone: the store would otherwise
    refuse (and redeliver forever) the whole batch it came in."""
    if not isinstance(doc, dict):
        raise _fail("not a JSON object")
    at = _check_envelope(doc)
    _check_fields(doc)
    advisory = Advisory.of(doc)  # every field it reads is checked above
    _check_pin(subject, advisory)
    return advisory, at


def advisory_json(data: bytes) -> object:
    """An advisory's JSON, within MAX_ADVISORY_BYTES; MalformedAdvisory saying why for anything else."""
    if len(data) > MAX_ADVISORY_BYTES:
        raise MalformedAdvisory(f"advisory of {len(data)} bytes, more than the {MAX_ADVISORY_BYTES} an advisory may be")
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedAdvisory(f"not JSON: {exc}") from None
    except RecursionError:
        raise MalformedAdvisory("not an advisory: JSON nested too deeply to read") from None


def parse_advisory(subject: str, data: bytes, account: str, received_at: str) -> AdvisoryRow:
    """One advisory as a row, in `account`: the account the capturing connection is in, as the
    server said. Raises MalformedAdvisory, saying why, for anything that is not an advisory jetwatch
    can store exactly, or that claims another account."""
    doc = advisory_json(data)
    advisory, at = validate_advisory(subject, doc)
    claimed = advisory.account
    if claimed and claimed != account:
        # The server publishes a consumer's advisories in the consumer's own account, with that
        # account's name: another name came from a user of this account (or an import of another
        # account's advisories), and would file its pin events under a consumer of that account.
        raise MalformedAdvisory(f"advisory claims account {claimed!r:.80}, but it was published in account "
                                f"{account!r:.80}, whose advisories name only their own account: forged, or "
                                "imported from another account; not stored")
    # A publisher may write a lone surrogate as a JSON escape: every text stored has U+FFFD instead.
    return AdvisoryRow(
        id=storable(advisory.id), ts=storable(rfc3339(at)), received_at=storable(received_at),
        kind=storable(advisory.kind), subject=storable(subject), account=storable(account),
        stream=_storable(advisory.stream), consumer=_storable(advisory.consumer),
        group_name=_storable(advisory.group), pinned_id=_storable(advisory.pinned_id),
        reason=_storable(advisory.reason), raw=storable(json.dumps(doc, ensure_ascii=False)))


def _storable(text: str | None) -> str | None:
    return None if text is None else storable(text)


@dataclass
class Fetched:
    """A batch of advisories read but not yet acknowledged."""

    messages: list[tuple[str, bytes]] = field(default_factory=list)
    to_ack: list[Msg] = field(default_factory=list)
    # Capture-stream sequence and stored time of each message (durable capture only).
    positions: list[tuple[int, dt.datetime]] = field(default_factory=list)


class Capture(Protocol):
    mode: str

    async def fetch(self) -> Fetched: ...
    async def ack(self, fetched: Fetched) -> None: ...
    async def first_seq(self) -> int | None: ...
    async def backlog(self) -> int | None: ...
    async def close(self) -> None: ...


def capture_stream_config(name: str, max_age_s: float, max_bytes: int) -> dict[str, Any]:
    return {
        "name": name, "subjects": list(SUBJECTS), "retention": "limits", "storage": "file",
        "discard": "old", "max_age": int(max_age_s * 1e9), "max_bytes": max_bytes,
        "num_replicas": 1, "duplicate_window": int(min(max_age_s, 120) * 1e9),
        "description": "jetwatch: durable capture of consumer advisories",
    }


@dataclass
class CaptureStream:
    """The capture stream as the server has it: which incarnation (`created`), and a warning in
    words when its limits differ from the settings and could not be corrected."""

    name: str
    created: str | None
    first_seq: int
    warning: str | None = None


_LIMITS = ("max_age", "max_bytes", "subjects")


async def open_capture_stream(api: JetStreamAPI, name: str, max_age_s: float, max_bytes: int) -> CaptureStream | None:
    """The capture stream, created if missing and its limits corrected if they differ from the
    settings (a stream update; if that is refused, a warning says what differs). None when it
    neither exists nor can be created."""
    wanted = capture_stream_config(name, max_age_s, max_bytes)
    try:
        info = await api.stream_info(name)
    except StreamNotFound:
        try:
            info = await api.add_stream(wanted)
            log.info("created capture stream %s", name)
        except (JetStreamAPIError, NoReply) as exc:
            log.warning("cannot create capture stream %s: %s", name, exc)
            return None
    differ = _differing_limits(StreamInfo.of(info).settings, wanted)
    warning = None
    if differ:
        try:
            # The update sends the whole config as the server has it: fields jetwatch does not read too.
            info = await api.update_stream({**(info.get("config") or {}), **{k: wanted[k] for k in differ}})
            log.warning("corrected the capture stream %s's limits: %s", name,
                        ", ".join(f"{k} {old} -> {new}" for k, (old, new) in differ.items()))
        except (JetStreamAPIError, NoReply) as exc:
            warning = (f"the capture stream {name} has other limits than the settings ("
                       + ", ".join(f"{k} {old} instead of {new}" for k, (old, new) in differ.items())
                       + f") and could not be corrected: {exc}. Run `jetwatch setup` with JetStream admin rights.")
            log.warning("%s", warning)
    stream = StreamInfo.of(info)
    return CaptureStream(name, stream.created, stream.current.first_seq, warning)


def _differing_limits(config: StreamConfig, wanted: dict[str, Any]) -> dict[str, tuple[object, object]]:
    """The capture stream's limits that differ from the settings': (as it is, as wanted) by name."""
    have: dict[str, object] = {"max_age": config.max_age, "max_bytes": config.max_bytes,
                               "subjects": config.subjects}
    return {k: (have[k], wanted[k]) for k in _LIMITS
            if (sorted(config.subjects or []) if k == "subjects" else have[k]) !=
            (sorted(wanted[k]) if k == "subjects" else wanted[k])}


async def ensure_capture_stream(api: JetStreamAPI, name: str, max_age_s: float, max_bytes: int) -> bool:
    """Create the capture stream if missing (correcting its limits); True if it exists afterwards."""
    return await open_capture_stream(api, name, max_age_s, max_bytes) is not None


class DurableCapture:
    """Reads the capture stream with a durable pull consumer."""

    mode = "durable"

    def __init__(self, nc: Client, api: JetStreamAPI, stream: str, durable: str,
                 forget_after_s: float, batch: int = 256, wait: float = 0.5):
        self.nc, self.api, self.stream, self.durable = nc, api, stream, durable
        self.forget_after_s, self.batch, self.wait = forget_after_s, batch, wait
        self._sub: Any = None

    async def open(self, start_seq: int | None = None) -> bool:
        """Bind to the durable, creating it if missing (from `start_seq`, the first sequence the
        store does not have, when known); True if it had to be created."""
        created = False
        try:
            await self.api.consumer_info(self.stream, self.durable)
        except ConsumerNotFound:
            start = {"deliver_policy": "by_start_sequence", "opt_start_seq": start_seq} if start_seq else {"deliver_policy": "all"}
            await self.api.add_consumer(self.stream, {
                "durable_name": self.durable, "ack_policy": "explicit", **start,
                "ack_wait": 5_000_000_000, "max_ack_pending": 10_000, "max_waiting": 16,
                "inactive_threshold": int(self.forget_after_s * 1e9),
                "description": "jetwatch collector: advisories not yet in its store",
            })
            created = True
        js = self.nc.jetstream(timeout=self.api.timeout)
        self._sub = await js.pull_subscribe_bind(self.durable, self.stream)
        return created

    async def fetch(self) -> Fetched:
        try:
            msgs = await self._sub.fetch(self.batch, timeout=self.wait)
        except (TimeoutError, nats.errors.TimeoutError):
            return Fetched()
        return Fetched([(m.subject, m.data) for m in msgs], msgs,
                       [(m.metadata.sequence.stream, m.metadata.timestamp) for m in msgs])

    async def ack(self, fetched: Fetched) -> None:
        # One ack per message: an AckAll for this batch would also ack messages that a killed
        # predecessor received and never stored, and they would never be redelivered.
        for msg in fetched.to_ack:
            await self.nc.publish(msg.reply, b"+ACK")
        await self.nc.flush()

    async def first_seq(self) -> int | None:
        """The oldest sequence the capture stream still holds (None if it cannot be read now):
        a skipped sequence before it is lost, one at or after it is still to come."""
        try:
            reply = await self.api.stream_info(self.stream)
        except (JetStreamAPIError, NoReply) as exc:
            log.info("reading capture stream %s's first sequence: %s", self.stream, exc)
            return None
        state = StreamInfo.of(reply).state
        return state.first_seq if state is not None else None

    async def backlog(self) -> int | None:
        """Advisories stored but not yet acknowledged; 0 means the store has them all."""
        info = ConsumerInfo.of(await self.api.consumer_info(self.stream, self.durable))
        return info.num_pending + info.num_ack_pending

    async def close(self) -> None:
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception as exc:  # the connection or the stream may be gone: nothing to release
                log.info("closing the capture subscription: %s", exc)
            self._sub = None


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
            except TimeoutError:
                pass
        self._arrived.clear()
        taken, self._buffer = self._buffer, []
        return Fetched(taken)

    async def ack(self, fetched: Fetched) -> None:
        return None

    async def first_seq(self) -> int | None:
        return None  # a plain subscription sees no sequences

    async def backlog(self) -> int | None:
        return 0

    async def close(self) -> None:
        for sub in self._subs:
            await sub.unsubscribe()
