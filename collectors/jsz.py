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
    """`/jsz` of every server's HTTP monitoring port.

    A consumer's `cluster.leader` is a server *name*, and `/jsz` carries only the server's id
    (nats-server 2.15), so each server's name is read once from its `/varz` (again if the id
    behind a URL changes: a restarted or replaced server)."""

    def __init__(self, urls: tuple[str, ...], timeout: float = 5.0):
        self.urls = tuple(u.rstrip("/") for u in urls)
        self.timeout = timeout
        self.where = ", ".join(self.urls)
        self.names: dict[str, tuple[str, str]] = {}  # url -> (server id, server name)

    async def _fetch(self, url: str) -> ServerReport | None:
        try:
            jsz = await asyncio.to_thread(_get, url + JSZ_QUERY, self.timeout)
            server_id = str(jsz.get("server_id") or "?")
            known = self.names.get(url)
            if known is None or known[0] != server_id:
                varz = await asyncio.to_thread(_get, url + "/varz", self.timeout)
                self.names[url] = known = (server_id, str(varz.get("server_name") or server_id))
        except (OSError, ValueError):
            return None
        return ServerReport(jsz.get("server_name") or known[1], jsz)

    async def reports(self) -> list[ServerReport]:
        replies = await asyncio.gather(*(self._fetch(u) for u in self.urls))
        return [r for r in replies if r is not None]


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
    cluster = consumer.get("cluster") if isinstance(consumer.get("cluster"), dict) else {}
    return not cluster.get("leader") or cluster.get("leader") == server_name


class JszCollector:
    def __init__(self, source: JszSource, name_filter: NameFilter, clock: Callable[[], str]):
        self.source = source
        self.name_filter = name_filter
        self.clock = clock
        self.known_hashes: dict[tuple[str, str, str], str] = {}
        # The consumers each server led when it last answered: if it stops answering, they keep
        # their last known state (and the status says which server) instead of vanishing.
        self.led: dict[str, set[tuple[str, str, str]]] = {}

    async def collect(self) -> SampleBatch:
        reports = await self.source.reports()
        if not reports:
            raise NoReply(f"no JSZ report came back from {self.source.where}")
        return self.batch_from_reports(reports)

    def batch_from_reports(self, reports: list[ServerReport]) -> SampleBatch:
        """The cycle's batch from the servers' JSZ reports: each consumer from its leader. An
        entry that is malformed goes to the rejects with the reason; every other one is kept."""
        batch = SampleBatch()
        now = self.clock()
        seen: set[tuple[str, str, str]] = set()
        led: dict[str, set[tuple[str, str, str]]] = {}
        for report in reports:
            batch.saw_server_time(report.jsz.get("now"))
            for account in _objects(report.jsz.get("account_details")):
                scope = Scope(account=str(account.get("name") or account.get("id") or "$G"), server=report.server)
                batch.accounts.add(scope.account)
                for stream in _objects(account.get("stream_detail")):
                    name = stream.get("name", "")
                    if not isinstance(name, str) or not self.name_filter.stream_ok(name):
                        continue
                    batch.streams += 1
                    for info in stream.get("consumer_detail") or []:
                        if not isinstance(info, dict):
                            batch.rejects.append(("jsz", f"consumer entry is {type(info).__name__}, expected an object",
                                                  json.dumps(info, default=str)[:10000]))
                            continue
                        key = (scope.account, name, str(info.get("name")))
                        if key in seen or not leads(info, report.server) or not self.name_filter.consumer_ok(key[2]):
                            continue
                        try:
                            add_consumer(batch, {"stream_name": name, **info}, scope, now, self.known_hashes)
                        except MalformedState as exc:
                            batch.reject("jsz", exc, info, scope.account, name)
                            continue
                        seen.add(key)
                        led.setdefault(report.server, set()).add(key)
        self._keep_unanswered(batch, {r.server for r in reports}, led, seen)
        return batch

    def _keep_unanswered(self, batch: SampleBatch, answered: set[str],
                         led: dict[str, set[tuple[str, str, str]]], seen: set[tuple[str, str, str]]) -> None:
        """Servers that answered before and not now: what they led and nobody reported this
        cycle keeps its last known state, and the cycle's errors name the server."""
        for server in sorted(set(self.led) - answered):
            kept = self.led[server] - seen
            self.led[server] = kept
            if kept:
                batch.unanswered.extend(sorted(kept))
                batch.errors.append(f"server {server} did not answer its JSZ request: the {len(kept)} consumer(s) "
                                    "it led keep their last known state (stale) until it answers or their "
                                    "leadership moves; check that the server runs and its monitoring port is reachable")
            else:
                del self.led[server]
        self.led.update(led)


def _objects(value: Any) -> list[dict[str, Any]]:
    """The dicts of a JSZ list (anything else in it is not an entry jetwatch can read)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
