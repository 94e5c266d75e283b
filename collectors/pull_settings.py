"""Pull settings: what each worker announces it pulls with, checked against CONNZ and stored.

A worker announces on `jetwatch.pull.announce.<stream>.<consumer>` (core/pull_announce.py) the
settings of its pull requests, pinned or not, again every minute while it pulls. Each is checked
against CONNZ as a pin announcement is (collectors/pin_holders.py `check`), once per connection:
a connection already verified is not asked about again. Stored one row per announcing connection
(`pull_settings`), and kept in memory for judging: the config findings of each consumer read the
settings announced within `CURRENT_FOR` (health/config_findings.py `pull_findings`), except those
CONNZ contradicts (`unverified`: someone else's connection, or a name it does not have).

Read with a plain subscription, as pin announcements are: one published while the collector is
down is not seen, and the worker's next one (within a minute) takes its place.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from collections.abc import Callable
from typing import Any

import duckdb
from nats.aio.client import Client

from jetwatch import sql
from jetwatch.collectors.announcement_inbox import AnnouncementInbox, origin_of
from jetwatch.collectors.pin_holders import Connz, check
from jetwatch.collectors.store_write import StoreWrite
from jetwatch.core.clock import utcnow
from jetwatch.core.pin_announce import UNVERIFIED, VERIFIED, BadAnnouncement
from jetwatch.core.pull_announce import ANNOUNCE_EVERY, SUBJECTS, PullAnnouncement, parse_pull_announcement
from jetwatch.core.text import storable

log = logging.getLogger("jetwatch.pull_settings")

# Settings announced within this long are current: three of a worker's announcements may be missed.
CURRENT_FOR = dt.timedelta(seconds=3 * ANNOUNCE_EVERY)
# Announcing connections kept in memory: a bound, so announcements cannot grow the collector without end.
MAX_REMEMBERED = 10_000
Key = tuple[str, str, str]


def worker_key(account: str | None, ann: PullAnnouncement) -> str:
    """One announcing connection: its consumer, the connection the server names and the name it claims."""
    return json.dumps([account, ann.stream, ann.consumer, ann.server_id, ann.client_id, ann.name])


def settings_row(ann: PullAnnouncement, verification: str, note: str, account: str | None,
                 received_at: dt.datetime) -> dict[str, Any]:
    """The announcement as the store's `pull_settings` row."""
    p = ann.pull
    row = {"worker_key": worker_key(account, ann), "account": account, "stream": ann.stream, "consumer": ann.consumer,
           "name": ann.name, "host": ann.host, "pid": ann.pid, "version": ann.version, "client_id": ann.client_id,
           "server_id": ann.server_id, "group_name": p.group, "policy": p.policy, "expires_ns": p.expires_ns,
           "batch": p.batch, "min_pending": p.min_pending, "min_ack_pending": p.min_ack_pending,
           "priority": p.priority, "no_wait": p.no_wait, "verification": verification, "verification_note": note,
           "received_at": received_at}
    return {k: storable(v) if isinstance(v, str) else v for k, v in row.items()}


def store_settings(con: duckdb.DuckDBPyConnection, row: dict[str, Any]) -> None:
    con.execute(sql.query("upsert_pull_settings"), row)


def recent_settings(con: duckdb.DuckDBPyConnection, since: dt.datetime) -> list[dict[str, Any]]:
    cur = con.execute(sql.query("pull_settings_recent"), {"since": since})
    names = [d[0] for d in cur.description or []]
    return [dict(zip(names, r)) for r in cur.fetchall()]


class PullSettingsCapture:
    """Subscribes to the pull-settings announcements, checks and stores each; `current(now)` is
    what judging reads: per consumer, the settings its workers announced lately."""

    def __init__(self, nc: Client, connz: Connz | None, account: str | None, write: StoreWrite,
                 clock: Callable[[], dt.datetime] = utcnow):
        self.nc, self.connz, self.account, self.write, self.clock = nc, connz, account, write, clock
        self.rows: dict[str, dict[str, Any]] = {}  # worker_key -> its latest row
        self._inbox = AnnouncementInbox(nc, SUBJECTS, "pull-settings announcement")

    async def open(self, known: list[dict[str, Any]] | None = None) -> None:
        for row in known or []:
            self.rows[row["worker_key"]] = row

        await self._inbox.open()

    async def handle(self, subject: str, data: bytes) -> dict[str, Any] | None:
        """Check and store one announcement; the stored row, or None if it was not one."""
        try:
            ann = parse_pull_announcement(subject, data)
        except BadAnnouncement as exc:
            self._inbox.drop(f"not pull-settings announcements ({exc})")
            return None
        if not self._inbox.admit(origin_of(ann.server_id, ann.client_id)):
            return None
        known = self.rows.get(worker_key(self.account, ann))
        if known is not None and known["verification"] == VERIFIED:
            verification, note = VERIFIED, known["verification_note"]  # the same connection, checked already
        else:
            checked = await check(self.connz, ann, self.account)
            verification, note = checked.verification, checked.note
        row = settings_row(ann, verification, note, self.account, self.clock())
        await self.write(lambda con: store_settings(con, row))
        row["first_seen_at"] = known["first_seen_at"] if known else row["received_at"]
        self.rows.pop(row["worker_key"], None)
        self.rows[row["worker_key"]] = row  # the newest last: the bound drops the longest silent
        while len(self.rows) > MAX_REMEMBERED:
            self.rows.pop(next(iter(self.rows)))
        log.debug("pull settings of %s/%s announced by %s (%s)", ann.stream, ann.consumer, ann.name, note)
        return row

    def current(self, now: dt.datetime) -> dict[Key, list[dict[str, Any]]]:
        """Per (account, stream, consumer), the settings announced within CURRENT_FOR of `now` by
        connections CONNZ did not contradict, newest last; older ones are forgotten."""
        since = now - CURRENT_FOR
        out: dict[Key, list[dict[str, Any]]] = {}
        for key in [k for k, r in self.rows.items() if r["received_at"] < since]:
            del self.rows[key]
        for row in self.rows.values():
            if row["verification"] != UNVERIFIED:
                out.setdefault((row["account"], row["stream"], row["consumer"]), []).append(row)
        return out

    async def run(self, stop: asyncio.Event) -> None:
        await self._inbox.run(stop, self.handle)

    async def close(self) -> None:
        await self._inbox.close()
