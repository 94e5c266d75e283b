"""Who asked for each unpin: the server's API audit advisory, filtered to unpin requests on receipt.

An unpin made outside jetwatch (the `nats` CLI, a script, another tool) leaves an UNPINNED advisory
with reason `admin` and nothing about who asked. The server also publishes, for every JetStream API
call of the account, an advisory on the one flat subject `$JS.EVENT.ADVISORY.API` (type
`io.nats.jetstream.advisory.v1.api_audit`) naming the client that made it (`client`: name, connection
id, host, user, account) with the request and response bodies. That subject carries everything,
jetwatch's own listing and message reads included, so this collector reads it with a plain
subscription, drops every message that is not an unpin request before parsing it (a byte search for
the unpin subject), and stores of an unpin only who asked, which consumer and group, and whether the
server refused it (sql/migrations/0016_pin_causes.sql). Nothing is kept of the other calls.

Seen on nats-server 2.15.1: the audit advisory follows the UNPINNED advisory by well under a
millisecond; the server publishes it only while someone subscribes, and then for every API call
(its cost: the server encodes, and the collector receives, a copy of every API reply, its own
CONSUMER.LIST pages included; `--capture-unpin-requests false` turns it off). A plain subscription
misses requests made while the collector is down: those unpins read "requester not captured".
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
from nats.aio.msg import Msg

from jetwatch import sql
from jetwatch.collectors.store_write import StoreWrite
from jetwatch.core.clock import parse_rfc3339, utcnow
from jetwatch.core.text import storable

log = logging.getLogger("jetwatch.unpin_requests")

SUBJECT = "$JS.EVENT.ADVISORY.API"
AUDIT_TYPE = "io.nats.jetstream.advisory.v1.api_audit"
UNPIN_PREFIX = "$JS.API.CONSUMER.UNPIN."
# The byte pattern every server-written audit advisory of an unpin holds (Go's encoder writes no
# spaces and does not escape `$`); anything without it is dropped unparsed.
MARK = b'"subject":"$JS.API.CONSUMER.UNPIN.'
MAX_BYTES = 16 * 1024  # an unpin's request and response are a few dozen bytes each
NAME_CHARS = 256


class NotAnUnpinRequest(ValueError):
    """A message on the audit subject that is not an unpin request jetwatch can store."""


def _name(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > NAME_CHARS:
        raise NotAnUnpinRequest(f"{what} is {value!r:.40}, expected a string of at most {NAME_CHARS} characters")
    return storable(value)


def _error(response: Any) -> str | None:
    """The server's refusal in the response body ('10160 ...'), None when it was done."""
    try:
        doc = json.loads(response) if isinstance(response, str) else {}
    except ValueError:
        return "unreadable response"
    error = doc.get("error") if isinstance(doc, dict) else None
    if not error:
        return None
    if isinstance(error, dict):
        return storable(f"{error.get('err_code') or error.get('code') or ''} {error.get('description') or ''}".strip()[:512])
    return storable(str(error)[:512])


def parse_unpin_request(data: bytes, received_at: dt.datetime, account: str | None) -> dict[str, Any] | None:
    """The audit advisory as an `unpin_requests` row; None for any other API call (dropped without
    parsing); raises NotAnUnpinRequest for one that claims to be an unpin and is not readable."""
    if MARK not in data:
        return None
    if len(data) > MAX_BYTES:
        raise NotAnUnpinRequest(f"{len(data)} bytes, more than an unpin's audit advisory may be")
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise NotAnUnpinRequest(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("type") != AUDIT_TYPE:
        raise NotAnUnpinRequest(f"not an API audit advisory (type {doc.get('type') if isinstance(doc, dict) else None!r:.60})")
    subject = doc.get("subject")
    if not isinstance(subject, str) or not subject.startswith(UNPIN_PREFIX):
        return None
    tokens = subject[len(UNPIN_PREFIX):].split(".")
    if len(tokens) != 2 or not all(tokens):
        raise NotAnUnpinRequest(f"unpin subject {subject!r:.200} does not name one stream and one consumer")
    if not isinstance(doc.get("id"), str) or not doc["id"] or len(doc["id"]) > 128:
        raise NotAnUnpinRequest("audit advisory without a usable id")
    try:
        at = parse_rfc3339(doc.get("timestamp"))
    except (ValueError, TypeError) as exc:
        raise NotAnUnpinRequest(f"timestamp: {exc}") from None
    client: dict[str, Any] = doc["client"] if isinstance(doc.get("client"), dict) else {}
    try:
        group = json.loads(doc.get("request") or "{}").get("group")
    except (ValueError, AttributeError):
        group = None
    cid = client.get("id")
    return {
        "id": doc["id"], "ts": at, "received_at": received_at,
        "account": _name(client.get("acc"), "client.acc") or account,
        "stream": _name(tokens[0], "stream"), "consumer": _name(tokens[1], "consumer"),
        "group_name": group if isinstance(group, str) and len(group) <= NAME_CHARS else None,
        "client_name": _name(client.get("name"), "client.name"),
        "client_id": cid if isinstance(cid, int) and not isinstance(cid, bool) and 0 <= cid < 2**63 else None,
        "client_host": _name(client.get("host"), "client.host"),
        "client_user": _name(client.get("user"), "client.user"),
        "client_account": _name(client.get("acc"), "client.acc"),
        "server": _name(doc.get("server"), "server"),
        "error": _error(doc.get("response")),
    }


def store_requests(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]) -> None:
    for row in rows:
        con.execute(sql.query("insert_unpin_request"), row)




class UnpinRequestCapture:
    """Subscribes to the API audit advisory, keeps unpin requests, stores them in small batches."""

    def __init__(self, nc: Client, account: str | None, write: StoreWrite, clock: Callable[[], dt.datetime] = utcnow,
                 watched: Callable[[str, str], bool] = lambda stream, consumer: True):
        self.nc, self.account, self.write, self.clock, self.watched = nc, account, write, clock, watched
        self._queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=1000)
        self._sub: Any = None
        self.seen = 0  # audit advisories received (every API call), for the log
        self.kept = 0

    async def open(self) -> None:
        async def arrived(msg: Msg) -> None:
            self.seen += 1
            if MARK not in msg.data:  # every other API call: dropped here, never parsed
                return
            try:
                self._queue.put_nowait(msg.data)
            except asyncio.QueueFull:
                log.warning("unpin requests arrive faster than they are stored: one dropped")

        self._sub = await self.nc.subscribe(SUBJECT, cb=arrived)

    async def handle(self, batch: list[bytes]) -> list[dict[str, Any]]:
        """Parse and store a batch; the rows stored."""
        now = self.clock()
        rows = []
        for data in batch:
            try:
                row = parse_unpin_request(data, now, self.account)
            except NotAnUnpinRequest as exc:
                log.warning("a message on %s is not an unpin request jetwatch can store (%s); ignored", SUBJECT, exc)
                continue
            if row is not None and self.watched(row["stream"], row["consumer"]):
                rows.append(row)
        if rows:
            await self.write(lambda con: store_requests(con, rows))
            self.kept += len(rows)
            for r in rows:
                log.info("unpin of %s/%s group %s requested by %s (connection %s)%s", r["stream"], r["consumer"],
                         r["group_name"], r["client_name"], r["client_id"], f": refused, {r['error']}" if r["error"] else "")
        return rows

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                first = await asyncio.wait_for(self._queue.get(), 0.5)
            except TimeoutError:
                continue
            batch = [first]
            while not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                await self.handle(batch)
            except Exception as exc:  # one batch's failure never stops the capture
                log.warning("%d unpin request(s) were not stored: %s", len(batch), exc)

    async def close(self) -> None:
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception as exc:  # the connection may be gone: nothing to release
                log.info("closing the API audit subscription: %s", exc)
            self._sub = None
