"""Sample every consumer of every account from JSZ reports: the servers' HTTP `/jsz` endpoints,
or `$SYS.REQ.SERVER.PING.JSZ` over a system-account connection.

A few requests cover a whole deployment. Only a consumer's leader reports fresh pending counts
and pin state, so each consumer is taken from the server that leads it.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import nats.errors
from nats.aio.client import Client

from jetwatch.collectors.consumer_state import MalformedState, SampleBatch, Scope, add_consumer
from jetwatch.collectors.filters import NameFilter
from jetwatch.core.jsapi import NoReply

JSZ_QUERY = "/jsz?accounts=true&streams=true&consumers=true&config=true"
PING_JSZ = "$SYS.REQ.SERVER.PING.JSZ"
# The system request spells it `consumer` (singular), unlike the HTTP query.
PING_OPTIONS = json.dumps({"accounts": True, "streams": True, "consumer": True, "config": True}).encode()


@dataclass
class ServerReport:
    """One server's JSZ report and the name its consumers' `cluster.leader` uses for it."""

    server: str
    jsz: dict[str, Any]


class JszSource(Protocol):
    where: str

    async def reports(self) -> list[ServerReport]: ...


def _get(url: str, timeout: float) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 (operator-given URL)
        return json.loads(resp.read())


class HttpJsz:
    """`/jsz` of every server's HTTP monitoring port."""

    def __init__(self, urls: tuple[str, ...], timeout: float = 5.0):
        self.urls = tuple(u.rstrip("/") for u in urls)
        self.timeout = timeout
        self.where = ", ".join(self.urls)

    async def _fetch(self, url: str) -> dict[str, Any] | None:
        try:
            return await asyncio.to_thread(_get, url + JSZ_QUERY, self.timeout)
        except (OSError, ValueError):
            return None

    async def reports(self) -> list[ServerReport]:
        replies = await asyncio.gather(*(self._fetch(u) for u in self.urls))
        return [ServerReport(r.get("server_name") or r.get("server_id") or "?", r) for r in replies if r]


class SystemJsz:
    """`$SYS.REQ.SERVER.PING.JSZ`: every server answers, so replies are gathered until `timeout`
    or until none has come for `quiet` seconds after the last (as `nats server ping` does)."""

    def __init__(self, nc: Client, timeout: float = 5.0, quiet: float = 0.5):
        self.nc, self.timeout, self.quiet = nc, timeout, quiet
        self.where = f"{PING_JSZ} (system account)"

    async def reports(self) -> list[ServerReport]:
        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox)
        out: list[ServerReport] = []
        try:
            await self.nc.publish(PING_JSZ, PING_OPTIONS, reply=inbox)
            deadline = time.monotonic() + self.timeout
            while (left := deadline - time.monotonic()) > 0:
                try:
                    msg = await sub.next_msg(timeout=min(left, self.quiet) if out else left)
                except (nats.errors.TimeoutError, asyncio.TimeoutError):
                    break
                try:
                    doc = json.loads(msg.data)
                except ValueError:
                    continue
                if isinstance(doc, dict) and isinstance(doc.get("data"), dict):
                    server = doc.get("server") or {}
                    out.append(ServerReport(server.get("name") or server.get("id") or "?", doc["data"]))
        finally:
            await sub.unsubscribe()
        return out


def leads(consumer: dict[str, Any], server_name: str) -> bool:
    cluster = consumer.get("cluster") or {}
    return not cluster.get("leader") or cluster.get("leader") == server_name


class JszCollector:
    def __init__(self, source: JszSource, name_filter: NameFilter, clock: Callable[[], str]):
        self.source = source
        self.name_filter = name_filter
        self.clock = clock
        self.known_hashes: dict[tuple[str, str, str], str] = {}

    async def collect(self) -> SampleBatch:
        reports = await self.source.reports()
        if not reports:
            raise NoReply(f"no JSZ report came back from {self.source.where}")
        batch = SampleBatch()
        now = self.clock()
        seen: set[tuple[str, str, str]] = set()
        for report in reports:
            for account in report.jsz.get("account_details") or []:
                scope = Scope(account=account.get("name") or account.get("id") or "$G", server=report.server)
                batch.accounts.add(scope.account)
                for stream in account.get("stream_detail") or []:
                    name = stream.get("name", "")
                    if not self.name_filter.stream_ok(name):
                        continue
                    batch.streams += 1
                    for info in stream.get("consumer_detail") or []:
                        key = (scope.account, name, str(info.get("name")))
                        if key in seen or not leads(info, report.server) or not self.name_filter.consumer_ok(key[2]):
                            continue
                        seen.add(key)
                        try:
                            add_consumer(batch, {"stream_name": name, **info}, scope, now, self.known_hashes)
                        except MalformedState as exc:
                            batch.rejects.append(("jsz", str(exc), json.dumps(info)[:10000]))
        return batch
