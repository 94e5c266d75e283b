"""Pin holders: the announcements workers publish when pinned, checked against CONNZ and stored.

A worker announces itself on `jetwatch.pin.announce.<stream>.<consumer>` (core/pin_announce.py).
Pin ids are broadcast in advisories, so anyone could announce one: the announcement names the
connection that sent it (server-assigned client id and server id), and this collector asks that
server's CONNZ, while the connection is still there, whether it exists under the claimed name (and
account, where CONNZ says). Only then is the holder `verified`. A holder belongs to one consumer
(account, stream, consumer and pin id: the subject's): an announcement of a pin id that a pinned
advisory or the live state shows on another consumer is refused, and a verified holder is replaced
only by the same connection, never by a forgery nor by another real connection claiming the pin.

Announcements are read with a plain subscription: one published while the collector is down is
not seen, and that pin shows "unannounced" until its worker is pinned again.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import duckdb
import nats.errors
from nats.aio.client import Client

from jetwatch import sql
from jetwatch.collectors.announcement_inbox import AnnouncementInbox, origin_of
from jetwatch.collectors.store_write import StoreWrite
from jetwatch.core import deadline_http
from jetwatch.core.advisory_row import AdvisoryRow, timed_out
from jetwatch.core.clock import parse_rfc3339, utcnow
from jetwatch.core.pin_announce import (
    NO_CONNZ,
    SUBJECTS,
    UNVERIFIED,
    VERIFIED,
    Announcement,
    BadAnnouncement,
    HolderKey,
    holder_key,
    parse_announcement,
)
from jetwatch.core.settings import MONITOR_MAX_BYTES
from jetwatch.core.text import storable
from jetwatch.core.urls import split_userinfo

log = logging.getLogger("jetwatch.pin_holders")

# Holders kept in memory for /metrics: a bound, so announcements cannot grow the collector without end.
MAX_REMEMBERED = 10_000
NO_CONNZ_NOTE = ("the collector has no CONNZ access: give it --monitor-url or --system-context to verify "
                 "announcements")


class ConnzUnavailable(Exception):
    """CONNZ could not be asked (the monitoring port or the system account did not answer)."""


class Connz(Protocol):
    async def connection(self, server_id: str, cid: int, closed_too: bool = False) -> dict[str, Any] | None: ...


class HttpConnz:
    """`/connz?cid=N` of the monitoring port whose server has the announced server id."""

    def __init__(self, urls: tuple[str, ...], timeout: float = 5.0, max_bytes: int = MONITOR_MAX_BYTES):
        split = [split_userinfo(u) for u in urls]
        self.urls = tuple(bare.rstrip("/") for bare, _, _ in split)
        self._auth = {bare.rstrip("/"): ("Basic " + base64.b64encode(f"{user}:{password or ''}".encode()).decode()
                                         if user is not None else None) for bare, user, password in split}
        self.timeout = timeout
        self.max_bytes = max_bytes

    def _get(self, url: str, path: str) -> dict[str, Any]:
        return json.loads(deadline_http.get(url + path, self.timeout, self._auth.get(url), max_bytes=self.max_bytes))

    async def connection(self, server_id: str, cid: int, closed_too: bool = False) -> dict[str, Any] | None:
        answered = False
        state = "&state=any" if closed_too else ""
        for url in self.urls:
            try:
                reply = await asyncio.to_thread(self._get, url, f"/connz?cid={int(cid)}&auth=true{state}")
            except deadline_http.TooLarge as exc:
                log.warning("%s: that port's /connz was not read; check that %s is the server's monitoring port, or "
                            "raise --monitor-max-bytes", str(exc), url)
                continue
            except (OSError, ValueError):
                continue
            answered = True
            if reply.get("server_id") == server_id:
                return next(iter(reply.get("connections") or []), None)
        if not answered:
            raise ConnzUnavailable(f"no monitoring port answered /connz ({', '.join(self.urls)})")
        return None  # the announced server is none of the monitored ones


class SystemConnz:
    """`$SYS.REQ.SERVER.<id>.CONNZ` over a system-account connection: the announced server only."""

    def __init__(self, nc: Client, timeout: float = 5.0):
        self.nc, self.timeout = nc, timeout

    async def connection(self, server_id: str, cid: int, closed_too: bool = False) -> dict[str, Any] | None:
        # `state` 2 is the server's ConnAll: open connections, then the closed ones it remembers.
        options = {"cid": int(cid), "auth": True, **({"state": 2} if closed_too else {})}
        try:
            msg = await self.nc.request(f"$SYS.REQ.SERVER.{server_id}.CONNZ",
                                        json.dumps(options).encode(), timeout=self.timeout)
        except (TimeoutError, nats.errors.NoRespondersError, nats.errors.TimeoutError):
            return None  # no such server (any more): nothing there to verify against
        try:
            data = json.loads(msg.data).get("data") or {}
        except (ValueError, AttributeError) as exc:
            raise ConnzUnavailable(f"CONNZ reply not readable: {exc}") from None
        return next(iter(data.get("connections") or []), None)


class Claim(Protocol):
    """Who an announcement says sent it: a pin announcement or a pull-settings one."""

    @property
    def name(self) -> str: ...
    @property
    def client_id(self) -> int | None: ...
    @property
    def server_id(self) -> str | None: ...


@dataclass(frozen=True)
class Checked:
    verification: str  # VERIFIED, UNVERIFIED or NO_CONNZ
    note: str


async def check(connz: Connz | None, ann: Claim, account: str | None) -> Checked:
    """Whether the connection the announcement names exists under its claimed name and account."""
    if connz is None:
        return Checked(NO_CONNZ, NO_CONNZ_NOTE)
    if ann.client_id is None or not ann.server_id:
        return Checked(UNVERIFIED, "the announcement names no connection (client_id, server_id)")
    try:
        conn = await connz.connection(ann.server_id, ann.client_id)
    except ConnzUnavailable as exc:
        return Checked(NO_CONNZ, f"CONNZ did not answer: {exc}")
    if conn is None:
        return Checked(UNVERIFIED, f"CONNZ shows no connection {ann.client_id} on server {ann.server_id}")
    name = conn.get("name") or ""
    if name != ann.name:
        return Checked(UNVERIFIED, f"connection {ann.client_id} is named {name!r:.80}, not {ann.name!r:.80}")
    where = conn.get("account")
    if where and account and where != account:
        return Checked(UNVERIFIED, f"connection {ann.client_id} is in account {where!r:.80}, not {account!r:.80}")
    return Checked(VERIFIED, f"CONNZ shows connection {ann.client_id} named {name!r:.80}"
                             + (f" in account {where}" if where else ""))


async def holder_exit(connz: Connz | None, pin_id: str, client_id: float | None, server_id: str | None,
                      checked_at: dt.datetime) -> dict[str, object]:
    """What CONNZ says now of the connection a pin's holder announced: `open`, `closed` (with the
    server's stop time and reason), or `unknown` (no CONNZ, no connection named, or none remembered)."""
    row = {"pin_id": pin_id, "checked_at": checked_at, "state": "unknown", "stopped_at": None, "stop_reason": None,
           "note": None}
    if connz is None:
        return {**row, "note": NO_CONNZ_NOTE}
    if client_id is None or pd_missing(client_id) or not server_id:
        return {**row, "note": "the holder announced no connection"}
    try:
        conn = await connz.connection(str(server_id), int(client_id), closed_too=True)
    except ConnzUnavailable as exc:
        return {**row, "note": f"CONNZ did not answer: {exc}"}
    if conn is None:
        return {**row, "note": f"CONNZ remembers no connection {int(client_id)} on server {server_id}"}
    stop = conn.get("stop")
    if not stop:
        return {**row, "state": "open", "note": f"connection {int(client_id)} is still open"}
    try:
        stopped = parse_rfc3339(stop)
    except ValueError:
        stopped = None
    return {**row, "state": "closed", "stopped_at": stopped, "stop_reason": storable(str(conn.get("reason") or ""))[:256] or None,
            "note": f"connection {int(client_id)} closed"}


def pd_missing(value: object) -> bool:
    return isinstance(value, float) and value != value


def holder_row(ann: Announcement, checked: Checked, account: str | None, received_at: dt.datetime) -> dict[str, Any]:
    """The announcement as the store's `pin_holders` row."""
    row = {"pin_id": ann.pin_id, "account": account, "stream": ann.stream, "consumer": ann.consumer,
           "group_name": ann.group, "name": ann.name, "host": ann.host, "pid": ann.pid, "version": ann.version,
           "client_id": ann.client_id, "server_id": ann.server_id, "verification": checked.verification,
           "verification_note": checked.note, "received_at": received_at}
    return {k: storable(v) if isinstance(v, str) else v for k, v in row.items()}


def store_holder(con: duckdb.DuckDBPyConnection, row: dict[str, Any]) -> tuple[str, str] | None:
    """Store the row unless a verified holder of another connection has the key; the holder stored
    afterwards (name, verification), whichever it is."""
    con.execute(sql.query("upsert_pin_holder"), row)
    key = {k: row[k] for k in ("account", "stream", "consumer", "pin_id")}
    found = con.execute(sql.query("pin_holder_stored"), key).fetchone()
    return (found[0], found[1]) if found else None


def pin_elsewhere(con: duckdb.DuckDBPyConnection, account: str | None, ann: Announcement) -> tuple[Any, ...] | None:
    """Another consumer (account, stream, consumer) that a pinned advisory or the live state shows
    with the announced pin id, if any. Asked with the names as they would be stored (`storable`)."""
    names = {"stream": ann.stream, "consumer": ann.consumer, "pin_id": ann.pin_id}
    return con.execute(sql.query("pin_elsewhere"),
                       {"account": account, **{k: storable(v) for k, v in names.items()}}).fetchone()


def remembered_holders(con: duckdb.DuckDBPyConnection, since: dt.datetime) -> dict[HolderKey, tuple[str, str]]:
    return {holder_key(account, stream, consumer, pin): (name, verification)
            for account, stream, consumer, pin, name, verification
            in con.execute(sql.query("pin_holders_recent"), {"since": since}).fetchall()}




class PinHolderCapture:
    """Subscribes to the announcements, checks and stores each; `holders` (holder_key -> (name,
    verification)) is what /metrics labels each consumer's pin with."""

    def __init__(self, nc: Client, connz: Connz | None, account: str | None, write: StoreWrite,
                 clock: Callable[[], dt.datetime] = utcnow):
        self.nc, self.connz, self.account, self.write, self.clock = nc, connz, account, write, clock
        self.holders: dict[HolderKey, tuple[str, str]] = {}
        self._inbox = AnnouncementInbox(nc, SUBJECTS, "pin announcement")
        self._exits: asyncio.Queue[AdvisoryRow] = asyncio.Queue(maxsize=1000)

    async def open(self, known: dict[HolderKey, tuple[str, str]] | None = None) -> None:
        self.holders.update(known or {})

        await self._inbox.open()

    async def handle(self, subject: str, data: bytes) -> dict[str, Any] | None:
        """Check and store one announcement; the row it was stored as, or None if it was not one
        or was refused (a pin id another consumer has)."""
        try:
            ann = parse_announcement(subject, data)
        except BadAnnouncement as exc:
            self._inbox.drop(f"not pin announcements ({exc})")
            return None
        if not self._inbox.admit(origin_of(ann.server_id, ann.client_id)):
            return None
        other = await self.write(lambda con: pin_elsewhere(con, self.account, ann))
        if other is not None:
            self._inbox.drop("refused: they name a pin id another consumer has")
            log.debug("%.100s announced pin %.40s on %.100s/%.100s, but that pin is %.100s/%.100s's: refused",
                      ann.name, ann.pin_id, ann.stream, ann.consumer, other[1], other[2])
            return None
        checked = await check(self.connz, ann, self.account)
        row = holder_row(ann, checked, self.account, self.clock())
        stored = await self.write(lambda con: store_holder(con, row))
        if stored is not None:
            key = holder_key(self.account, row["stream"], row["consumer"], row["pin_id"])
            self.holders.pop(key, None)
            self.holders[key] = stored  # the newest last: the bound drops the oldest
            while len(self.holders) > MAX_REMEMBERED:
                self.holders.pop(next(iter(self.holders)))
        log.info("pin %s of %s/%s announced by %s: %s", ann.pin_id, ann.stream, ann.consumer, ann.name, checked.note)
        return row

    def exits_to_check(self, advisories: Sequence[AdvisoryRow]) -> int:
        """Queue the timed-out pins among stored advisories for `run_exits` (the advisory capture never
        waits on CONNZ); a full queue drops the check, which leaves that move's cause priority_timeout."""
        queued = 0
        for a in filter(timed_out, advisories):
            try:
                self._exits.put_nowait(a)
                queued += 1
            except asyncio.QueueFull:
                log.warning("timed-out pins arrive faster than CONNZ is asked about them: one not checked")
        return queued

    async def run_exits(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                first = await asyncio.wait_for(self._exits.get(), 0.5)
            except TimeoutError:
                continue
            batch = [first]
            while not self._exits.empty():
                batch.append(self._exits.get_nowait())
            try:
                await self.check_exits(batch)
            except Exception as exc:  # a failure costs these facts only
                log.warning("checking timed-out pin holders' connections failed: %s: %s", type(exc).__name__, exc)

    async def check_exits(self, advisories: Sequence[AdvisoryRow]) -> list[dict[str, object]]:
        """For each pin that just timed out (stored UNPINNED advisories, reason `timeout`), ask CONNZ
        about the connection its holder announced and store the answer: the pin moved because its
        holder disconnected, or it stopped pulling while still connected."""
        out = []
        for a in filter(timed_out, advisories):
            key = {"account": a["account"], "stream": a["stream"], "consumer": a["consumer"], "ts": a["ts"]}
            def ended(con: duckdb.DuckDBPyConnection, key: dict[str, str | None] = key) -> tuple[Any, ...] | None:
                return con.execute(sql.query("ended_pin_holder"), key).fetchone()

            found = await self.write(ended)
            if not found:
                continue
            pin_id, client_id, server_id = found
            row = await holder_exit(self.connz, pin_id, client_id, server_id, self.clock())
            def store(con: duckdb.DuckDBPyConnection, row: dict[str, object] = row) -> None:
                con.execute(sql.query("upsert_pin_holder_exit"), row)

            await self.write(store)
            log.info("pin %s timed out; its holder's connection: %s (%s)", pin_id, row["state"], row["note"])
            out.append(row)
        return out

    async def run(self, stop: asyncio.Event) -> None:
        await self._inbox.run(stop, self.handle)

    async def close(self) -> None:
        await self._inbox.close()
