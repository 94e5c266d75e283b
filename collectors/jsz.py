"""Sample every consumer of every account from JSZ reports: the servers' HTTP `/jsz` endpoints,
or `$SYS.REQ.SERVER.PING.JSZ` over a system-account connection.

A few requests cover a whole deployment. Only a consumer's leader reports fresh pending counts
and pin state, so each consumer is taken from the server that leads it.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import msgspec
import nats.errors
from nats.aio.client import Client

from jetwatch.collectors.consumer_state import MalformedState, SampleBatch, Scope, add_consumer
from jetwatch.collectors.filters import NameFilter
from jetwatch.collectors.list_pages import Listing, RawFingerprints, read_listings
from jetwatch.core import deadline_http
from jetwatch.core.jsapi import NoReply
from jetwatch.core.settings import MONITOR_MAX_BYTES
from jetwatch.core.text import loads_storable
from jetwatch.core.urls import split_userinfo
from jetwatch.health.cluster import API_UNAVAILABLE, NO_LEADER, PEER_SILENT_S, Evidence, silent_for

log = logging.getLogger("jetwatch.jsz")

JSZ_QUERY = "/jsz?accounts=true&streams=true&consumers=true&config=true"
PING_JSZ = "$SYS.REQ.SERVER.PING.JSZ"
# The system request spells it `consumer` (singular), unlike the HTTP query.
PING_OPTIONS = json.dumps({"accounts": True, "streams": True, "consumer": True, "config": True}).encode()


@dataclass
class ServerReport:
    """One server's JSZ report and the name its consumers' `cluster.leader` uses for it: as sent
    (`raw`, read straight into Arrow by the collector), or decoded (`jsz`). A report that was
    decoded is read from its dict."""

    server: str
    jsz: dict[str, Any] | None = None
    raw: bytes | None = None

    def decoded(self) -> dict[str, Any]:
        if self.jsz is None:
            self.jsz = loads_storable(self.raw if self.raw is not None else b"null")  # a lone surrogate is U+FFFD
        return self.jsz


class _Head(msgspec.Struct):
    server_id: Any = None
    server_name: Any = None


_NULL = msgspec.Raw(b"null")


class _Ping(msgspec.Struct):
    server: Any = None
    data: msgspec.Raw = _NULL


class _Stream(msgspec.Struct):
    name: Any = ""
    consumer_detail: msgspec.Raw = _NULL


class _Account(msgspec.Struct):
    name: Any = None
    id: Any = None
    stream_detail: list[_Stream] | None = None


class _Report(msgspec.Struct):
    now: Any = None
    meta_cluster: Any = None
    account_details: list[_Account] | None = None


_HEAD = msgspec.json.Decoder(_Head)
_PING = msgspec.json.Decoder(_Ping)
_REPORT = msgspec.json.Decoder(_Report)


class JszSource(Protocol):
    where: str

    async def reports(self) -> list[ServerReport]: ...


def _basic_auth(user: str | None, password: str | None) -> str | None:
    if user is None:
        return None
    return "Basic " + base64.b64encode(f"{user}:{password or ''}".encode()).decode()


class HttpJsz:
    """`/jsz` of every server's HTTP monitoring port.

    A consumer's `cluster.leader` is a server *name*, and `/jsz` carries only the server's id
    (nats-server 2.15), so each server's name is read once from its `/varz` (again if the id
    behind a URL changes: a restarted or replaced server)."""

    def __init__(self, urls: tuple[str, ...], timeout: float = 5.0, max_bytes: int = MONITOR_MAX_BYTES):
        """`timeout` bounds each server's whole read (its `/jsz`, and its `/varz` when that is
        read too), not only each socket operation: a server that trickles its reply is given up
        at the deadline, one that sends more than `max_bytes` at the cap; each is said in `late`,
        and the cycle goes on with the others' reports."""
        # `http://user:pass@host:8222` (a monitoring port behind basic auth): the credentials go in
        # a header; the URL kept, and said in every error, log line and status, is the bare one.
        split = [split_userinfo(u) for u in urls]
        self.urls = tuple(bare.rstrip("/") for bare, _, _ in split)
        self._auth = {bare.rstrip("/"): _basic_auth(user, password) for bare, user, password in split}
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.where = ", ".join(self.urls)
        self.names: dict[str, tuple[str, str]] = {}  # url -> (server id, server name)
        self.late: list[str] = []  # the last read's servers given up (deadline, size cap), in words

    async def _fetch(self, url: str) -> ServerReport | None:
        ends = time.monotonic() + self.timeout
        try:
            raw = await asyncio.to_thread(partial(deadline_http.get, url + JSZ_QUERY, self.timeout, self._auth.get(url),
                                                  max_bytes=self.max_bytes))
            raw.decode()  # not UTF-8: left out, as json.loads left it out (msgspec does not check what it skips)
            report = ServerReport("?", raw=raw)
            try:
                head: Any = _HEAD.decode(raw)
            except (msgspec.DecodeError, RecursionError):  # read as before, decoded
                jsz = report.decoded()
                if not isinstance(jsz, dict):
                    return None  # not a report: left out, as a reply that is not JSON is
                head = _Head(jsz.get("server_id"), jsz.get("server_name"))
            server_id = str(head.server_id or "?")
            known = self.names.get(url)
            if known is None or known[0] != server_id:
                left = ends - time.monotonic()
                if left <= 0:
                    raise deadline_http.TooSlow(f"{url} did not answer within {self.timeout:g}s")
                varz = loads_storable(await asyncio.to_thread(partial(deadline_http.get, url + "/varz", left,
                                                                      self._auth.get(url), max_bytes=self.max_bytes)))
                name = varz.get("server_name") if isinstance(varz, dict) else None
                self.names[url] = known = (server_id, name if isinstance(name, str) and name else server_id)
        except deadline_http.TooSlow as exc:
            self.late.append(f"{exc}: its consumers were not read this cycle; check the server's monitoring port "
                             "(and any proxy in front of it)")
            return None
        except deadline_http.TooLarge as exc:
            said = (f"{exc}: its consumers were not read this cycle; check that {url} is the server's monitoring "
                    "port, or raise --monitor-max-bytes if the server holds that many consumers")
            log.warning("%s", said)
            self.late.append(said)
            return None
        except (OSError, ValueError, RecursionError):
            return None
        report.server = head.server_name if isinstance(head.server_name, str) and head.server_name else known[1]
        return report

    async def reports(self) -> list[ServerReport]:
        self.late = []
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
                except (TimeoutError, nats.errors.TimeoutError):
                    break
                report = _report(msg.data)
                if report is not None:
                    out.append(report)
        finally:
            await sub.unsubscribe()
        return out


def _report(data: bytes) -> ServerReport | None:
    """A PING.JSZ reply's report, its `data` kept as sent; one msgspec will not read this way is
    decoded as before."""
    try:
        data.decode()  # as json.loads would refuse it (msgspec does not check what it skips)
    except UnicodeDecodeError:
        return None
    try:
        ping = _PING.decode(data)
        if isinstance(ping.server, dict) or not ping.server:
            data = bytes(ping.data)
            if not data.startswith(b"{"):
                return None
            return ServerReport(_server_name(ping.server), raw=data)
    except (msgspec.DecodeError, RecursionError):
        pass
    try:
        doc = loads_storable(data)
    except (ValueError, RecursionError):
        return None
    if isinstance(doc, dict) and isinstance(doc.get("data"), dict):
        return ServerReport(_server_name(doc.get("server")), doc["data"])
    return None


def _server_name(server: object) -> str:
    """The replying server's name (else its id) from a PING reply's `server` object; "?" when it
    gives neither as text (the name is stored with each sample it leads)."""
    if not isinstance(server, dict):
        return "?"
    return next((v for v in (server.get("name"), server.get("id")) if isinstance(v, str) and v), "?")


def _decodes(report: ServerReport) -> bool:
    """Whether a report decodes to an object; one that does not is left out, as its source left
    out a reply that was not JSON before reports were kept as sent."""
    try:
        return isinstance(report.decoded(), dict)
    except (ValueError, RecursionError):
        return False


def leader_of(consumer: dict[str, Any]) -> str | None:
    """The leader a JSZ entry names (None: it names none)."""
    cluster = consumer.get("cluster")
    leader = cluster.get("leader") if isinstance(cluster, dict) else None
    return leader if isinstance(leader, str) and leader else None


def leads(leader: object, server_name: str, clustered: bool) -> bool:
    """Whether the server that reported an entry leads its consumer, so the entry is fresh. A server
    outside a cluster leads all it has; in a cluster only the named leader does, and an entry that
    names none (its replicas lost their quorum, or its leader is gone) is fresh nowhere."""
    if isinstance(leader, str) and leader:
        return leader == server_name
    return not clustered


class _Leaderless:
    """Consumers that clustered servers report without a fresh entry from their leader: where no
    entry names a leader, no server leads them (not one the collector merely failed to reach,
    whose followers still name it); where entries name one whose report does not carry it (an
    election under way, a leader restarting with its assets not yet loaded, a server outside
    --monitor-url), it is still there: either way kept as last known, never dropped."""

    def __init__(self) -> None:
        self.named: dict[tuple[str, str, str], str] = {}
        self.unnamed: dict[tuple[str, str, str], set[str]] = {}

    def saw(self, key: tuple[str, str, str], leader: object, server: str, clustered: bool) -> None:
        if isinstance(leader, str) and leader:
            self.named[key] = leader
        elif clustered:
            self.unnamed.setdefault(key, set()).add(server)

    def into(self, batch: SampleBatch, taken: set[tuple[str, str, str]], silent: set[str]) -> None:
        """`silent`: the servers that led before and did not answer now, whose consumers
        JszCollector._keep_unanswered keeps and names."""
        for key in sorted(set(self.unnamed) - set(self.named) - taken):
            reporters = ", ".join(sorted(self.unnamed[key]))
            batch.evidence[key] = Evidence(NO_LEADER, f"its /jsz entry on {reporters} names no leader")
            batch.unanswered.append(key)
        elsewhere = sorted(key for key in set(self.named) - taken if self.named[key] not in silent)
        batch.unanswered.extend(elsewhere)
        if elsewhere:
            leaders = ", ".join(sorted({self.named[key] for key in elsewhere}))
            batch.errors.append(f"{len(elsewhere)} consumer(s) are named led by {leaders} on other servers' /jsz, and "
                                "no report of that leader carries them: they keep their last known state (stale) "
                                "until it does; if this lasts, give --monitor-url that server's monitoring port too")


class JszCollector:
    def __init__(self, source: JszSource, name_filter: NameFilter, clock: Callable[[], str]):
        self.source = source
        self.name_filter = name_filter
        self.clock = clock
        self.known_hashes: dict[tuple[str, str, str], str] = {}
        self.raw_fingerprints: RawFingerprints = {}  # the latest cycle's configs, for reports read into Arrow
        # The consumers each server led when it last answered: if it stops answering, they keep
        # their last known state (and the status says which server) instead of vanishing.
        self.led: dict[str, set[tuple[str, str, str]]] = {}
        self.silent_since: dict[str, float] = {}  # monotonic time each such server first did not answer
        # Consumers found without a leader: said so while nothing fresh is heard of them, even once
        # the cluster can no longer tell (its meta group lost its leader too).
        self.gone: dict[tuple[str, str, str], Evidence] = {}
        self.cut_seen: dict[str, float] = {}  # servers seen cut off from the cluster, since when (monotonic)

    def remember(self, keys: Sequence[tuple[str, str, str]], leaders: Sequence[object]) -> None:
        """The consumers the store knew, each under the server that led it when last sampled, as if
        that server had answered last: a collector that starts while a server is dead keeps what
        the server led, and names it, instead of never having known it."""
        for key, leader in zip(keys, leaders):
            if isinstance(leader, str) and leader:
                self.led.setdefault(leader, set()).add(key)

    async def collect(self) -> SampleBatch:
        reports = await self.source.reports()
        late = list(getattr(self.source, "late", ()))
        if not reports:
            raise NoReply(f"no JSZ report came back from {self.source.where}" + "".join(f"; {w}" for w in late))
        batch = self.batch_from_reports(reports)
        batch.errors.extend(late)
        return batch

    def batch_from_reports(self, reports: list[ServerReport]) -> SampleBatch:
        """The cycle's batch from the servers' JSZ reports: each consumer from its leader. Read
        straight into Arrow (list_pages.py); when anything is not plainly well formed, decoded
        and read entry by entry, where a malformed entry goes to the rejects with the reason and
        every other one is kept."""
        if all(r.jsz is None and r.raw is not None for r in reports):
            batch = self._read(reports)
            if batch is not None:
                return batch
        reports = [r for r in reports if _decodes(r)]
        batch = SampleBatch()
        now = self.clock()
        seen: set[tuple[str, str, str]] = set()
        led: dict[str, set[tuple[str, str, str]]] = {}
        leaderless = _Leaderless()
        metas: dict[str, Any] = {}
        for report in reports:
            jsz = report.decoded()
            clustered = isinstance(jsz.get("meta_cluster"), dict)
            metas[report.server] = jsz.get("meta_cluster")
            batch.saw_server_time(jsz.get("now"))
            for account in _objects(jsz.get("account_details")):
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
                        if not self.name_filter.consumer_ok(key[2]):
                            continue
                        leader = leader_of(info)
                        leaderless.saw(key, leader, report.server, clustered)
                        if key in seen or not leads(leader, report.server, clustered):
                            continue
                        try:
                            add_consumer(batch, {"stream_name": name, **info}, scope, now, self.known_hashes)
                        except MalformedState as exc:
                            batch.reject("jsz", exc, info, scope.account, name)
                            continue
                        seen.add(key)
                        led.setdefault(report.server, set()).add(key)
        leaderless.into(batch, seen, set(self.led) - {r.server for r in reports})
        self._keep_unanswered(batch, {r.server for r in reports}, led, seen, metas)
        self.raw_fingerprints = {}
        return batch

    def _read(self, reports: list[ServerReport]) -> SampleBatch | None:
        """The reports read straight into Arrow, as batch_from_reports reads them decoded; None
        when anything on them is not plainly well formed."""
        raws = [r.raw for r in reports if r.raw is not None]  # every one: batch_from_reports checked
        try:
            for raw in raws:
                raw.decode()  # msgspec does not check the UTF-8 of what it skips; decoding would refuse it
            docs = [_REPORT.decode(raw) for raw in raws]
        except (UnicodeDecodeError, msgspec.DecodeError, RecursionError):
            return None
        batch = SampleBatch()
        listings: list[Listing] = []
        clustered: dict[str, bool] = {}
        for report, doc in zip(reports, docs):
            clustered[str(report.server)] = isinstance(doc.meta_cluster, dict)
            batch.saw_server_time(doc.now)
            for account in doc.account_details or ():
                scope = Scope(account=str(account.name or account.id or "$G"), server=report.server)
                batch.accounts.add(scope.account)
                for stream in account.stream_detail or ():
                    if not isinstance(stream.name, str) or not self.name_filter.stream_ok(stream.name):
                        continue
                    batch.streams += 1
                    detail = bytes(stream.consumer_detail)
                    if detail != b"null":
                        listings.append(Listing(stream.name, [b'{"consumers":' + detail + b"}"], scope))
        seen: set[tuple[str, str, str]] = set()
        led: dict[str, set[tuple[str, str, str]]] = {}
        leaderless = _Leaderless()

        def keep(rows: list[Listing], names: list[str], leaders: list[Any]) -> list[bool]:
            taken = []
            for listing, name, leader in zip(rows, names, leaders):
                key, server = (listing.scope.account, listing.stream, name), str(listing.scope.server)  # report.server
                wanted = self.name_filter.consumer_ok(name)
                if wanted:
                    leaderless.saw(key, leader, server, clustered[server])
                ok = key not in seen and leads(leader, server, clustered[server]) and wanted
                if ok:
                    seen.add(key)
                    led.setdefault(server, set()).add(key)
                taken.append(ok)
            return taken

        fingerprints: RawFingerprints = {}
        read = read_listings(listings, self.clock(), keep, self.known_hashes, self.raw_fingerprints, fingerprints)
        if read is None:
            return None
        self.raw_fingerprints = fingerprints
        read.into(batch)
        leaderless.into(batch, seen, set(self.led) - {r.server for r in reports})
        self._keep_unanswered(batch, {r.server for r in reports}, led, seen,
                              {str(r.server): d.meta_cluster for r, d in zip(reports, docs)})
        return batch

    def _keep_unanswered(self, batch: SampleBatch, answered: set[str],
                         led: dict[str, set[tuple[str, str, str]]], seen: set[tuple[str, str, str]],
                         metas: dict[str, Any]) -> None:
        """Servers that answered before and not now: what they led and nobody reported this
        cycle keeps its last known state, and the cycle's errors name the server."""
        view = _meta_view(metas)
        now = time.monotonic()
        self.silent_since = {s: t for s, t in self.silent_since.items() if s not in answered}
        for server in sorted(set(self.led) - answered):
            kept = self.led[server] - seen
            self.led[server] = kept
            self._evidence_for(batch, server, kept, view, now - self.silent_since.setdefault(server, now))
            if kept:
                batch.unanswered.extend(sorted(kept))
                batch.errors.append(f"server {server} did not answer its JSZ request: the {len(kept)} consumer(s) "
                                    "it led keep their last known state (stale) until it answers or their "
                                    "leadership moves; check that the server runs and its monitoring port is reachable")
            else:
                del self.led[server]
        self.led.update(led)
        self._cut_off(batch, led, metas)
        found = dict(self.gone)
        found.update({(k[0], k[1], k[2]): ev for k, ev in batch.evidence.items() if len(k) == 3})
        self.gone = {key: ev for key, ev in found.items() if key not in seen and ev.verdict == NO_LEADER}

    def _evidence_for(self, batch: SampleBatch, server: str, kept: set[tuple[str, str, str]],
                      view: tuple[set[str], bool], held: float) -> None:
        """What the cluster says of the consumers a silent server led: where the meta leader
        reports the server gone, or there is no meta leader to say anything, that is evidence
        about them (health/cluster.py), dated from when the server fell silent; a server only the
        collector cannot reach is not. A consumer found without a leader stays so."""
        down, meta_leaderless = view
        for key in kept:
            found = batch.evidence.get(key)
            if found is not None:  # without a leader since its leader's server fell silent, at least
                batch.evidence[key] = dataclasses.replace(found, held_s=max(found.held_s, held))
            elif server in down:
                batch.evidence[key] = Evidence(
                    NO_LEADER, f"its leader's server {server} does not answer, and the meta leader reports it gone",
                    (server,), held)
            elif meta_leaderless:
                batch.evidence[key] = self.gone.get(key) or Evidence(
                    API_UNAVAILABLE, f"its leader's server {server} does not answer, and the cluster has no meta "
                                     "leader", (server,), held)


    def _cut_off(self, batch: SampleBatch, led: dict[str, set[tuple[str, str, str]]], metas: dict[str, Any]) -> None:
        """A server that answers and sees no meta leader, while the meta leader has not heard from it
        lately, is cut off from the rest of the cluster (a partition of its routes): what it leads
        is served to the clients connected to it alone, and no other server can take it over (an
        R1 stream's consumers). Evidence about each once two cycles in a row show it (a server just
        restarted sees no meta leader for a moment while the meta leader's last word of it is still
        old), dated from when the meta leader last heard from it: since then nothing of it was served
        through the rest of the cluster."""
        now = time.monotonic()
        meta_leader = next((server for server, m in metas.items() if isinstance(m, dict) and m.get("leader") == server),
                           None)
        peers = {str(r.get("name")): r for r in _objects(metas[meta_leader].get("replicas"))} if meta_leader else {}
        cut: dict[str, float] = {}
        for server in sorted(set(led) & set(peers)):
            own, peer = metas.get(server), peers[server]
            if not isinstance(own, dict) or own.get("leader"):
                continue
            silent = silent_for(peer)
            if not (peer.get("offline") or peer.get("current") is False or silent >= PEER_SILENT_S):
                continue
            first = cut[server] = self.cut_seen.get(server, now)
            if first == now:
                continue  # seen once: the next cycle says whether it holds
            for key in led[server]:
                batch.evidence.setdefault(key, Evidence(
                    NO_LEADER, f"its leader {server} is cut off from the rest of the cluster (it sees no meta leader, "
                               f"and the meta leader {meta_leader} has not heard from it for {silent:.0f} s)", (server,),
                    held_s=silent, headline="no server the rest of the cluster reaches leads it",
                    stops=f"only clients connected to {server} reach it; nothing published or pulled through the "
                          "other servers does"))
        self.cut_seen = cut


def _meta_view(metas: dict[str, Any]) -> tuple[set[str], bool]:
    """What the answering servers' `meta_cluster` say of the cluster: the servers the meta leader
    reports not current (gone, as far as the cluster knows), and whether the clustered servers
    that answered all name no meta leader."""
    views = {server: m for server, m in metas.items() if isinstance(m, dict)}
    if not views:
        return set(), False
    leaders = {m.get("leader") for m in views.values()}
    leader_view = next((m for server, m in views.items() if m.get("leader") == server), None)
    down = {str(r.get("name")) for r in _objects((leader_view or {}).get("replicas")) if r.get("current") is False}
    return down, leaders <= {None, ""}


def _objects(value: object) -> list[dict[str, Any]]:
    """The dicts of a JSZ list (anything else in it is not an entry jetwatch can read)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
