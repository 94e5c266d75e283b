"""Who holds a pin: the announcement a pull worker publishes when the server pins it.

The server cannot map a pin id to a client: the pinned advisory carries only `pinned_id`, and
CONNZ shows no pin ids. A worker knows both (the `Nats-Pin-Id` header of its first message, and
who it is), so it says so once per pin, on `jetwatch.pin.announce.<stream>.<consumer>`, and
jetwatch captures it. The announcement carries the connection's server-assigned client id and
server id, so jetwatch can ask CONNZ whether that connection exists under the claimed name and
account: pin ids are broadcast in advisories, so anyone could announce one.

Worker side this module needs nats-py and the standard library only, nothing else of jetwatch:

    announcer = PinAnnouncer(nc, "ORDERS", "worker", group="jobs", version="1.4.2")
    ...
    await announcer.saw(msg)   # for every message a pull returns
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass
from typing import Any

SUBJECT_PREFIX = "jetwatch.pin.announce"
SUBJECTS = f"{SUBJECT_PREFIX}.>"
PIN_HEADER = "Nats-Pin-Id"
# Bounds on what an announcement may hold: names the server allows are at most 255 characters.
MAX_ANNOUNCEMENT_BYTES = 4096
FIELD_CHARS = 256

# How a stored announcement was checked against CONNZ.
VERIFIED = "verified"
UNVERIFIED = "unverified"
NO_CONNZ = "no_connz"
VERIFICATION_WORDS = {VERIFIED: "verified", UNVERIFIED: "unverified",
                      NO_CONNZ: "unverified (no CONNZ access)"}


class BadAnnouncement(ValueError):
    """A message on the announce subjects that is not an announcement jetwatch can store."""


def announce_subject(stream: str, consumer: str) -> str:
    """The subject a worker of `stream`/`consumer` announces on."""
    return f"{SUBJECT_PREFIX}.{stream}.{consumer}"


@dataclass(frozen=True)
class Announcement:
    """What a worker says about itself when pinned; nothing secret (no credentials, no env)."""

    pin_id: str
    stream: str
    consumer: str
    group: str | None
    name: str
    host: str
    pid: int
    version: str | None
    client_id: int | None  # the server's id of the announcing connection (INFO `client_id`)
    server_id: str | None  # the server that connection is on (INFO `server_id`)

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()


_TEXT = ("pin_id", "stream", "consumer", "name", "host")
_OPTIONAL_TEXT = ("group", "version", "server_id")


def announcement_object(data: bytes) -> dict[str, Any]:
    """An announcement's JSON object, within MAX_ANNOUNCEMENT_BYTES; BadAnnouncement saying why
    for anything else. Every kind of announcement is read through it."""
    if len(data) > MAX_ANNOUNCEMENT_BYTES:
        raise BadAnnouncement(f"{len(data)} bytes, more than the {MAX_ANNOUNCEMENT_BYTES} an announcement may be")
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise BadAnnouncement(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise BadAnnouncement("not a JSON object")
    return doc


def parse_announcement(subject: str, data: bytes) -> Announcement:
    """An announcement as published by `PinAnnouncer` (or a Go/JS client following docs/deployment.md);
    raises BadAnnouncement saying why for anything else, including one whose stream and consumer
    differ from its subject's."""
    doc = announcement_object(data)
    for key in _TEXT + _OPTIONAL_TEXT:
        value = doc.get(key)
        if value is None and key in _OPTIONAL_TEXT:
            continue
        if not isinstance(value, str) or (key in _TEXT and not value):
            raise BadAnnouncement(f"{key} is {value!r:.40}, expected a non-empty string")
        if len(value) > FIELD_CHARS:
            raise BadAnnouncement(f"{key} is {len(value)} characters, more than {FIELD_CHARS}")
    for key in ("pid", "client_id"):
        value = doc.get(key)
        if value is None and key == "client_id":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
            raise BadAnnouncement(f"{key} is {value!r:.40}, expected a whole number")
    if subject != announce_subject(doc["stream"], doc["consumer"]):
        raise BadAnnouncement(f"announcement for {doc['stream']}/{doc['consumer']} arrived on {subject!r:.200}")
    checked: dict[str, Any] = {k: doc.get(k) for k in Announcement.__dataclass_fields__}  # each checked above
    return Announcement(**checked)


HolderKey = tuple[str, str, str, str]


def holder_key(account: object, stream: object, consumer: object, pin_id: object) -> HolderKey:
    """Whose pin a holder is announced for: account ('' for none), stream, consumer and pin id.
    Pin ids are broadcast in advisories, so a holder is known per consumer, never by pin id alone."""
    return tuple("" if v is None or (isinstance(v, float) and v != v) else str(v)
                 for v in (account, stream, consumer, pin_id))  # type: ignore[return-value]


def verification_words(verification: object) -> str:
    """How an announcement was checked, in words ("verified"); unverified when not known."""
    return VERIFICATION_WORDS.get(verification, UNVERIFIED) if isinstance(verification, str) else UNVERIFIED


def holder_words(name: object, verification: object) -> str | None:
    """The holder as a person reads it ("worker-a · verified"); None when nobody announced the pin."""
    if not isinstance(name, str) or not name:
        return None
    return f"{name} · {verification_words(verification)}"


class PinAnnouncer:
    """Announces the worker each time the server pins it to a new pin id.

    Call `saw(msg)` for every message a pull returns; it publishes only on a `Nats-Pin-Id` it has
    not announced yet, so it costs one small publish per pin. `name` defaults to the connection's
    name: jetwatch verifies an announcement by finding that name on the connection that sent it,
    so a worker should connect with `name=` set (a pod name, say)."""

    def __init__(self, nc: Any, stream: str, consumer: str, group: str | None = None,
                 name: str | None = None, version: str | None = None):
        name = name or (getattr(nc, "options", None) or {}).get("name")
        if not name:
            raise ValueError("the worker has no name to announce: connect with nats.connect(..., name='<pod or "
                             "host name>') or pass name=")
        self.nc, self.stream, self.consumer, self.group = nc, stream, consumer, group
        self.name, self.version = name, version
        self.announced: str | None = None  # the pin id last announced

    def announcement(self, pin_id: str) -> Announcement:
        info = getattr(self.nc, "_server_info", None) or {}
        return Announcement(pin_id=pin_id, stream=self.stream, consumer=self.consumer, group=self.group,
                            name=self.name, host=socket.gethostname(), pid=os.getpid(), version=self.version,
                            client_id=info.get("client_id"), server_id=info.get("server_id"))

    async def saw(self, msg: object) -> bool:
        """Announce if `msg` carries a pin id not announced yet; True when it published."""
        pin_id = (getattr(msg, "headers", None) or {}).get(PIN_HEADER)
        if not pin_id or pin_id == self.announced:
            return False
        await self.nc.publish(announce_subject(self.stream, self.consumer), self.announcement(pin_id).encode())
        self.announced = pin_id
        return True
