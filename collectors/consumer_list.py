"""Sample every consumer of the connected account with CONSUMER.LIST paging.

One STREAM.NAMES walk and one CONSUMER.LIST walk per stream (256 consumers a page), a few
requests in flight at once: never one INFO request per consumer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from jetwatch.collectors.consumer_state import MalformedState, SampleBatch, Scope, add_consumer, note_quorum
from jetwatch.collectors.filters import NameFilter
from jetwatch.collectors.list_pages import RawFingerprints, read_pages
from jetwatch.collectors.state_columns import Fingerprints, add_consumers
from jetwatch.core.jsapi import JetStreamAPI, JetStreamAPIError, NoReply, StreamNotFound
from jetwatch.core.text import loads_storable
from jetwatch.health.cluster import ANSWERED, API_UNAVAILABLE, NO_LEADER, OFFLINE, Evidence, EvidenceKey

# While the API cannot list, at most this many consumers that the connected server led are asked
# for one by one (each INFO answered by that server itself, in a millisecond or so), and for no
# longer than this: a consumer without a quorum answers late or never, and the cycle goes on.
ASKED_WHILE_UNLISTED = 256
ASKED_FOR_AT_MOST_S = 2.0


class ConsumerListCollector:
    def __init__(self, api: JetStreamAPI, scope: Scope, name_filter: NameFilter,
                 clock: Callable[[], str], concurrency: int = 8):
        self.api = api
        self.scope = scope
        self.name_filter = name_filter
        self.clock = clock
        self.known_hashes: dict[tuple[str, str, str], str] = {}
        self.fingerprints: Fingerprints = {}  # the latest cycle's configs, to skip unchanged ones
        self.raw_fingerprints: RawFingerprints = {}  # the same, for cycles read into Arrow
        self.known_streams: list[str] = []  # the streams listed last: kept whole while the API cannot answer
        # Consumers the last listing named missing: still without a leader as far as anyone can tell
        # while the API does not answer (what was seen stays seen until a listing says otherwise).
        self.leaderless: dict[EvidenceKey, Evidence] = {}
        # (stream, consumer, leader) of each consumer as last sampled whole: the ones the connected
        # server led are asked for by name while the API cannot list.
        self._led: tuple[Sequence[object], Sequence[object], Sequence[object]] = ((), (), ())
        self._took: dict[str, float] = {}  # how long each stream's listing took this cycle
        self._limit = asyncio.Semaphore(concurrency)

    def remember(self, keys: Sequence[tuple[str, str, str]], leaders: Sequence[object]) -> None:
        """The streams of the consumers the store knew, as if listed last: a collector that starts
        while the cluster's API cannot answer keeps them, and says why, instead of knowing no
        stream and naming nothing. (Their leaders matter to JSZ sampling only.)"""
        account = self.scope.account
        self.known_streams = sorted({s for a, s, _ in keys if a == account and self.name_filter.stream_ok(s)})
        mine = [(s, c, leader) for (a, s, c), leader in zip(keys, leaders) if a == account]
        self._led = ([s for s, _, _ in mine], [c for _, c, _ in mine], [leader for _, _, leader in mine])

    async def collect(self) -> SampleBatch:
        began = time.monotonic()
        try:
            listed = await self.api.stream_names()
        except (NoReply, JetStreamAPIError) as exc:
            if not (self.known_streams and unavailable(exc)):
                raise
            batch = self._api_unavailable(exc, time.monotonic() - began)
            if not isinstance(exc, NoReply):  # the server answers, its meta group does not: its own leaders may
                await self._asked_one_by_one(batch)
            return batch
        names = [s for s in listed if self.name_filter.stream_ok(s)]
        self.known_streams = names
        batch = self.batch_from_pages(await self.fetch(names))
        self._remember_leaders(batch)
        return batch

    def _remember_leaders(self, batch: SampleBatch) -> None:
        """Who led each consumer, as this cycle sampled it; for a stream not listed now, as before."""
        streams, consumers, leaders = batch.samples["stream"], batch.samples["consumer"], batch.samples["leader"]
        failed = {stream for _, stream in batch.failed_streams}
        if failed:  # rare: the lists merged (a whole fleet's, once)
            kept = [(s, c, leader) for s, c, leader in zip(*self._led) if s in failed]
            streams, consumers, leaders = ([*streams, *(k[0] for k in kept)], [*consumers, *(k[1] for k in kept)],
                                           [*leaders, *(k[2] for k in kept)])
        self._led = (streams, consumers, leaders)

    async def _asked_one_by_one(self, batch: SampleBatch) -> None:
        """While the API cannot list, the consumers the connected server led when last sampled are
        asked for one by one: a consumer's leader answers for it without the meta group (an R1
        consumer on a server cut off from its peers still delivers to the clients there). Each
        that answers is a fresh sample, and the API's silence is no evidence about it."""
        here = (getattr(self.api.nc, "_server_info", None) or {}).get("server_name")
        streams, consumers, leaders = self._led
        led = [(s, c) for s, c, leader in zip(streams, consumers, leaders)
               if here and leader == here and isinstance(s, str) and isinstance(c, str)][:ASKED_WHILE_UNLISTED]
        if not led:
            return

        async def ask(stream: str, name: str) -> object:
            async with self._limit:
                try:
                    return await self.api.consumer_info(stream, name)
                except Exception:  # no answer, a refusal, the connection going: not served as far as we know
                    return None

        tasks = [asyncio.ensure_future(ask(s, c)) for s, c in led]
        await asyncio.wait(tasks, timeout=ASKED_FOR_AT_MOST_S)
        for task in tasks:
            task.cancel()  # those still waiting are left: the API's silence stands for them
        answers = [t.result() if t.done() and not t.cancelled() else None for t in tasks]
        now, account = self.clock(), self.scope.account
        for (stream, name), info in zip(led, answers):
            if not isinstance(info, dict) or not isinstance(info.get("cluster"), dict) or not info["cluster"].get("leader"):
                continue
            try:
                add_consumer(batch, info, self.scope, now, self.known_hashes)
            except MalformedState as exc:
                batch.reject(f"CONSUMER.INFO.{stream}.{name}", exc, info, account, stream)
                continue
            key = (account, stream, name)
            # A leader whose peers are gone answers as leader for seconds before it steps down: what
            # it says of its replicas decides (no quorum: NO_LEADER's evidence, not served).
            note_quorum(batch, key, info["cluster"].get("replicas"))
            batch.evidence.setdefault(key, ANSWERED)

    def _api_unavailable(self, exc: Exception, waited: float) -> SampleBatch:
        """A cycle in which the account's streams could not even be named: every stream listed
        before keeps its consumers' last known state, each judged API_UNAVAILABLE (dated from
        when the request that got no answer was sent)."""
        account = self.scope.account
        batch = SampleBatch(accounts={account})
        batch.failed_streams = [(account, s) for s in self.known_streams]
        batch.evidence.update(self.leaderless)
        batch.evidence[(account,)] = Evidence(API_UNAVAILABLE, f"STREAM.NAMES: {exc}", held_s=waited)
        batch.errors.append(f"the cluster's JetStream API does not answer ({exc}): the consumers of "
                            f"{len(self.known_streams)} stream(s) keep their last known state until it does; check "
                            "that a majority of the JetStream servers run (`nats server report jetstream`)")
        return batch

    async def fetch(self, names: list[str]) -> list[tuple[str, list[bytes] | None | Exception]]:
        """Each stream's CONSUMER.LIST pages as sent, at most `concurrency` requests in flight."""
        return list(zip(names, await asyncio.gather(*(self._stream(s) for s in names))))

    def batch_from_pages(self, pages: list[tuple[str, list[bytes] | None | Exception]]) -> SampleBatch:
        """The cycle's batch from each stream's CONSUMER.LIST pages (None: the stream was deleted
        meanwhile; an exception: listing it failed), read straight into Arrow (list_pages.py);
        when anything on them is not plainly well formed, decoded and read page by page."""
        listed = [(stream, got) for stream, got in pages if isinstance(got, list)]
        missing = self._missing(listed) + self._offline(listed)
        fingerprints: RawFingerprints = {}
        read = read_pages(listed, self.scope, self.clock(), self.name_filter, self.known_hashes,
                          self.raw_fingerprints, fingerprints)
        if read is None:
            return self._with_missing(self.batch_from_entries([(stream, _decoded(got)) for stream, got in pages]),
                                      missing)
        self.raw_fingerprints, self.fingerprints = fingerprints, {}  # one cache kept: each holds every config
        batch = SampleBatch(accounts={self.scope.account})
        for stream, got in pages:
            if isinstance(got, Exception):
                self._failed(batch, stream, got)
        batch.streams = len(listed)
        for ts in read.last_ts:
            if ts is not None:
                batch.saw_server_time(ts)
        read.into(batch)
        return self._with_missing(batch, missing)

    def _offline(self, pages: list[tuple[str, list[bytes]]]) -> list[tuple[str, str | None, Evidence]]:
        """OFFLINE evidence from each CONSUMER.LIST reply's `offline` map (ADR-44): consumers a
        running server holds but cannot load, with the server's reason (an API level or a setting
        it does not support, as after a downgrade). Such a consumer stops its whole stream on a
        single server, whose other consumers are then listed nowhere: a reply that lists none
        puts the stream itself under the evidence (None in place of a consumer)."""
        found: list[tuple[str, str | None, Evidence]] = []
        for stream, raws in pages:
            offline: dict[str, str] = {}
            listed = 0
            for raw in raws:
                if b'"offline"' not in raw:
                    listed += 1  # not decoded: a page without the word lists what it lists
                    continue
                try:
                    page = loads_storable(raw)
                except (ValueError, RecursionError):
                    continue
                if not isinstance(page, dict):
                    continue
                listed += len(page.get("consumers") or ())
                named = page.get("offline")
                if isinstance(named, dict):
                    offline.update({n: str(r) for n, r in named.items()
                                    if isinstance(n, str) and n and self.name_filter.consumer_ok(n)})
            for name, why in offline.items():
                found.append((stream, name, Evidence(OFFLINE, f"the server holds it offline ({why})",
                                                     headline="a running server cannot load it")))
            if offline and not listed:
                names = ", ".join(sorted(offline))
                found.append((stream, None, Evidence(
                    OFFLINE, f"the server cannot load its consumer {names} ({offline[min(offline)]}), and lists no "
                             "other", headline=f"its stream {stream} is stopped")))
        return found

    def _missing(self, pages: list[tuple[str, list[bytes]]]) -> list[tuple[str, str]]:
        """(stream, consumer) of each consumer a CONSUMER.LIST reply names under `missing`: listed,
        but no server that leads it answered the list's gather (ADR-44). Only pages that carry the
        word are decoded."""
        found = []
        for stream, raws in pages:
            for raw in raws:
                if b'"missing"' not in raw:
                    continue
                try:
                    names = loads_storable(raw).get("missing")
                except (ValueError, RecursionError, AttributeError):
                    continue
                found += [(stream, n) for n in names or () if isinstance(n, str) and n and self.name_filter.consumer_ok(n)]
        return found

    def _with_missing(self, batch: SampleBatch, missing: list[tuple[str, str] | tuple[str, str | None, Evidence]]
                      ) -> SampleBatch:
        """The consumers a listing named missing keep their last known state, each judged NO_LEADER
        (OFFLINE where the server said it cannot load them; a stream stopped so keeps all its
        consumers'); so do those named before, of a stream that could not be listed now."""
        account = self.scope.account
        unlisted = {stream for _, stream in batch.failed_streams}
        self.leaderless = {key: ev for key, ev in self.leaderless.items() if key[1] in unlisted}
        for entry in missing:  # dated from when the list was asked for: its leader was silent then
            if len(entry) == 3:
                stream, name, ev = entry
                self.leaderless[(account, stream) if name is None else (account, stream, name)] = ev
                if name is None:
                    batch.failed_streams.append((account, stream))
            elif (account, entry[0], entry[1]) not in self.leaderless:
                self.leaderless[(account, entry[0], entry[1])] = Evidence(
                    NO_LEADER, "CONSUMER.LIST names it under missing (no server that leads it answered)",
                    held_s=self._took.get(entry[0], 0.0))
        batch.evidence.update(self.leaderless)
        return batch

    def batch_from_entries(self, pages: list[tuple[str, list[Any] | None | Exception]]) -> SampleBatch:
        """The cycle's batch from each stream's decoded CONSUMER.LIST entries. One stream that
        failed, or one entry that is malformed, is set aside with the reason; every other
        consumer is kept."""
        batch = SampleBatch(accounts={self.scope.account})
        now = self.clock()
        fingerprints: Fingerprints = {}
        for stream, consumers in pages:
            if consumers is None:
                continue  # deleted between STREAM.NAMES and CONSUMER.LIST
            if isinstance(consumers, Exception):
                self._failed(batch, stream, consumers)
                continue
            batch.streams += 1
            if consumers and isinstance(consumers[-1], dict):
                batch.saw_server_time(consumers[-1].get("ts"))  # the page's last reply
            # A consumer whose replicas are all offline is listed as a placeholder (it is named
            # under `missing` too): evidence, never a sample.
            for info in consumers:
                if (name := placeholder_of(info)) is not None:
                    batch.evidence[(self.scope.account, stream, name)] = Evidence(NO_LEADER, PLACEHOLDER)
            consumers = [info for info in consumers if placeholder_of(info) is None]
            if self.name_filter.filters_consumers:
                consumers = [info for info in consumers
                             if not isinstance(info, dict) or self.name_filter.consumer_ok(str(info.get("name", "")))]
            if add_consumers(batch, consumers, self.scope, now, self.known_hashes, self.fingerprints, fingerprints):
                continue
            for info in consumers:  # something on the page is malformed: entry by entry, to reject it alone
                try:
                    add_consumer(batch, info, self.scope, now, self.known_hashes)
                except MalformedState as exc:
                    batch.reject(f"CONSUMER.LIST.{stream}", exc, info, self.scope.account, stream)
        self.fingerprints, self.raw_fingerprints = fingerprints, {}
        return batch

    def _failed(self, batch: SampleBatch, stream: str, exc: Exception) -> None:
        batch.failed_streams.append((self.scope.account, stream))
        batch.errors.append(f"listing the consumers of stream {stream!r} failed: {exc}")
        if unavailable(exc):
            batch.evidence[(self.scope.account, stream)] = Evidence(API_UNAVAILABLE, f"CONSUMER.LIST.{stream}: {exc}",
                                                                    held_s=self._took.get(stream, 0.0))

    async def _stream(self, stream: str) -> list[bytes] | None | Exception:
        async with self._limit:
            began = time.monotonic()
            try:
                return await self.api.consumer_list_pages(stream)
            except StreamNotFound:
                return None
            except NoReply as exc:
                return NoReply(f"{exc} (may the collector's user publish to $JS.API.CONSUMER.LIST.{stream}?)")
            except (JetStreamAPIError, ValueError, RecursionError) as exc:  # a refusal, a reply that is not JSON
                return exc
            finally:
                self._took[stream] = time.monotonic() - began


PLACEHOLDER = "CONSUMER.LIST holds only a placeholder for it, its replicas offline"


def placeholder_of(info: object) -> str | None:
    """The consumer a CONSUMER.LIST entry stands in for when it is the placeholder a server lists
    for a consumer it cannot load (no name, no stream, the name in its config alone), else None."""
    if not isinstance(info, dict) or info.get("name") != "" or info.get("stream_name"):
        return None
    config = info.get("config")
    name = config.get("name") if isinstance(config, dict) else None
    return name if isinstance(name, str) and name else None


def unavailable(exc: Exception) -> bool:
    """Whether a failed API request says the cluster cannot answer (503: JetStream temporarily
    unavailable; or no reply at all), rather than a refusal of this request."""
    return isinstance(exc, NoReply) or (isinstance(exc, JetStreamAPIError) and exc.code == 503)


def _decoded(got: list[bytes] | None | Exception) -> list[Any] | None | Exception:
    """A stream's pages decoded as JetStreamAPI.consumer_list decodes them: its entries, in order
    (each text as the server's own decoder reads it: a lone surrogate escaped is U+FFFD, which the
    store can keep)."""
    if not isinstance(got, list):
        return got
    entries: list[Any] = []
    for raw in got:
        try:
            page = loads_storable(raw)
        except (ValueError, RecursionError) as exc:  # as JetStreamAPI.request raised it
            return exc
        entries.extend(page.get("consumers") or [])
    return entries
