"""How a worker pulls: the announcement a pull worker publishes of the settings of its pull requests.

A pull request's settings (`expires`, `batch`, `group`, `min_pending`, `min_ack_pending`,
`priority`) live in the request only: consumer info never shows them, so jetwatch cannot tell that
a pinned worker's pulls outlast `priority_timeout`, or that an overflow standby waits for a
`min_ack_pending` the consumer can never reach. A worker knows them, so it says so on
`jetwatch.pull.announce.<stream>.<consumer>`: pinned or not (a standby, a plain pull worker), when
its settings change and again every `every` seconds while it pulls, so jetwatch knows they are
still in use. It names its connection (server-assigned client id and server id) as a pin
announcement does (core/pin_announce.py), and jetwatch checks it against CONNZ the same way.

A sibling of the pin announcement, not an extension of it: a pin announcement is one per pin id
and only from the holder; this one is per worker, from every worker. Old workers keep publishing
pin announcements only, unchanged.

Worker side this module needs nats-py and the standard library only, nothing else of jetwatch:

    announcer = PullAnnouncer(nc, "ORDERS", "worker", policy="overflow", version="1.4.2")
    ...
    request = {"batch": 10, "expires": 30_000_000_000, "group": "jobs", "min_pending": 100}
    await announcer.pulling(request)   # with every pull request the worker sends
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from jetwatch.core.pin_announce import FIELD_CHARS, BadAnnouncement, announcement_object

SUBJECT_PREFIX = "jetwatch.pull.announce"
SUBJECTS = f"{SUBJECT_PREFIX}.>"
# How often a worker says its settings again while it pulls with the same ones.
ANNOUNCE_EVERY = 60.0
# The policies a worker may say it pulls under (the consumer's `priority_policy`).
POLICIES = ("none", "overflow", "pinned_client", "prioritized")
# The pull request's own fields this announcement carries, by the request's names.
REQUEST_FIELDS = {"expires": "expires_ns", "batch": "batch", "group": "group", "min_pending": "min_pending",
                  "min_ack_pending": "min_ack_pending", "priority": "priority", "no_wait": "no_wait"}


def announce_subject(stream: str, consumer: str) -> str:
    """The subject a worker of `stream`/`consumer` announces its pull settings on."""
    return f"{SUBJECT_PREFIX}.{stream}.{consumer}"


@dataclass(frozen=True)
class PullSettings:
    """What a worker pulls with: the pull request's settings and the policy it pulls under. None:
    not sent (the server's default); `expires_ns` 0: the pull never expires."""

    group: str | None = None
    policy: str | None = None
    expires_ns: int | None = None
    batch: int | None = None
    min_pending: int | None = None
    min_ack_pending: int | None = None
    priority: int | None = None
    no_wait: bool = False

    @classmethod
    def of_request(cls, request: Mapping[str, Any], policy: str | None = None) -> PullSettings:
        """The settings of a pull request as the worker sends it to `$JS.API.CONSUMER.MSG.NEXT`."""
        given: dict[str, Any] = {mine: request.get(theirs) for theirs, mine in REQUEST_FIELDS.items()}
        given["no_wait"] = bool(given["no_wait"])
        return cls(policy=policy, **given)


@dataclass(frozen=True)
class PullAnnouncement:
    """A worker and the settings it pulls with; nothing secret (no credentials, no env)."""

    stream: str
    consumer: str
    name: str
    host: str
    pid: int
    version: str | None
    client_id: int | None  # the server's id of the announcing connection (INFO `client_id`)
    server_id: str | None  # the server that connection is on (INFO `server_id`)
    pull: PullSettings

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()


_TEXT = ("stream", "consumer", "name", "host")
_OPTIONAL_TEXT = ("version", "server_id")
# Pull settings: whole numbers in [low, high), None when not sent.
_NUMBERS = {"expires_ns": 2**63, "batch": 2**31, "min_pending": 2**63, "min_ack_pending": 2**63, "priority": 10}


def _whole(value: object, key: str, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < high:
        raise BadAnnouncement(f"{key} is {value!r:.40}, expected a whole number below {high}")
    return value


def _pull(doc: object) -> PullSettings:
    if not isinstance(doc, dict):
        raise BadAnnouncement("pull is not a JSON object")
    numbers = {k: None if doc.get(k) is None else _whole(doc.get(k), f"pull.{k}", high) for k, high in _NUMBERS.items()}
    group, policy = doc.get("group"), doc.get("policy")
    if group is not None and (not isinstance(group, str) or not 0 < len(group) <= FIELD_CHARS):
        raise BadAnnouncement(f"pull.group is {group!r:.40}, expected a group name")
    if policy is not None and policy not in POLICIES:
        raise BadAnnouncement(f"pull.policy is {policy!r:.40}, expected one of {', '.join(POLICIES)}")
    no_wait = doc.get("no_wait", False)
    if not isinstance(no_wait, bool):
        raise BadAnnouncement(f"pull.no_wait is {no_wait!r:.40}, expected true or false")
    return PullSettings(group=group, policy=policy, no_wait=no_wait, **numbers)


def parse_pull_announcement(subject: str, data: bytes) -> PullAnnouncement:
    """An announcement as published by `PullAnnouncer` (or a Go/JS client following
    docs/deployment.md); raises BadAnnouncement saying why for anything else, including one whose
    stream and consumer differ from its subject's. Fields it does not know are ignored."""
    doc = announcement_object(data)
    for key in _TEXT + _OPTIONAL_TEXT:
        value = doc.get(key)
        if value is None and key in _OPTIONAL_TEXT:
            continue
        if not isinstance(value, str) or not value:
            raise BadAnnouncement(f"{key} is {value!r:.40}, expected a non-empty string")
        if len(value) > FIELD_CHARS:
            raise BadAnnouncement(f"{key} is {len(value)} characters, more than {FIELD_CHARS}")
    pid = _whole(doc.get("pid"), "pid", 2**63)
    client_id = None if doc.get("client_id") is None else _whole(doc.get("client_id"), "client_id", 2**63)
    if subject != announce_subject(doc["stream"], doc["consumer"]):
        raise BadAnnouncement(f"announcement for {doc['stream']}/{doc['consumer']} arrived on {subject!r:.200}")
    return PullAnnouncement(stream=doc["stream"], consumer=doc["consumer"], name=doc["name"], host=doc["host"],
                            pid=pid, version=doc.get("version"), client_id=client_id,
                            server_id=doc.get("server_id"), pull=_pull(doc.get("pull")))


class PullAnnouncer:
    """Announces the settings a worker pulls with: call `pulling(request)` with each pull request
    it sends; it publishes when the settings differ from those last announced, or `every` seconds
    after, so it costs one small publish a minute. `policy` is the consumer's priority policy as
    the worker pulls under it (None: the worker does not say). `name` defaults to the connection's
    name, which jetwatch verifies against CONNZ: connect with `name=` set (a pod name, say)."""

    def __init__(self, nc: Any, stream: str, consumer: str, policy: str | None = None, name: str | None = None,
                 version: str | None = None, every: float = ANNOUNCE_EVERY,
                 clock: Callable[[], float] = time.monotonic):
        name = name or (getattr(nc, "options", None) or {}).get("name")
        if not name:
            raise ValueError("the worker has no name to announce: connect with nats.connect(..., name='<pod or "
                             "host name>') or pass name=")
        if policy is not None and policy not in POLICIES:
            raise ValueError(f"policy {policy!r} is none of {', '.join(POLICIES)}")
        self.nc, self.stream, self.consumer, self.policy = nc, stream, consumer, policy
        self.name, self.version, self.every, self.clock = name, version, every, clock
        self.announced: PullSettings | None = None
        self._at = 0.0

    def announcement(self, settings: PullSettings) -> PullAnnouncement:
        info = getattr(self.nc, "_server_info", None) or {}
        return PullAnnouncement(stream=self.stream, consumer=self.consumer, name=self.name, host=socket.gethostname(),
                                pid=os.getpid(), version=self.version, client_id=info.get("client_id"),
                                server_id=info.get("server_id"), pull=settings)

    async def pulling(self, request: Mapping[str, Any]) -> bool:
        """Announce the settings of `request` if new, or not said for `every` seconds; True when it published."""
        settings = PullSettings.of_request(request, self.policy)
        now = self.clock()
        if settings == self.announced and now - self._at < self.every:
            return False
        await self.nc.publish(announce_subject(self.stream, self.consumer), self.announcement(settings).encode())
        self.announced, self._at = settings, now
        return True
