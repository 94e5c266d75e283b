"""Time lag: how old each consumer's oldest unacknowledged and oldest undelivered messages are.

A stream keeps every message's timestamp, so an age is a fact: the oldest unacknowledged message
is the first one after the ack floor (`ack_floor.stream_seq`) that the consumer's filter matches,
the oldest undelivered one the first after `delivered.stream_seq`. It is read with
`$JS.API.DIRECT.GET.<stream>` where the stream allows direct get, else with
`$JS.API.STREAM.MSG.GET.<stream>`, always as `{"seq": floor + 1, "next_by_subj": filter}`: a plain
`{"seq": N}` of a message that limits or interest removed is a 404 (seen on 2.15.1), while
`next_by_subj` finds the first message still there. For several filter subjects, the earliest.

Cost stays bounded: a found message is cached while the floor stays put (the age then grows with
the sample's time, without a request); reads that are due run concurrently up to a cap; every
non-OK consumer is read each cycle and the others in turn (`lag_rotation` cycles). An age not read
this way is an estimate, interpolated over the stream's sequence/time history (the exact points
read so far, the stream's first and last message), and says so. A stream whose reads are refused
(the server sends no reply to a denied request) is read again after `RETRY_DENIED` seconds and
estimated meanwhile.

The same stream listing gives every consumer of the account, idle ones too, the room its stream
has before discard new refuses publishes (`stream_room_messages`): a full stream leaves its
consumers with nothing to do, which no consumer number shows.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import logging
import time
import zlib
from collections.abc import Callable, Hashable, Iterable, Set
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg

from jetwatch.collectors.consumer_state import SampleBatch
from jetwatch.core.clock import parse_rfc3339
from jetwatch.core.jsapi import JetStreamAPI, JetStreamAPIError, NoReply, check_name
from jetwatch.core.jsinfo import StreamInfo
from jetwatch.health.loss import Loss, StreamLimits, projected_loss, room_before_refused

log = logging.getLogger("jetwatch.lag")

EXACT, ESTIMATE = "exact", "estimate"
RETRY_DENIED = 300.0  # seconds before reads of a refused stream are tried again
READ_TIMEOUT = 2.0  # a denied read gets no reply: this bounds what it costs
HISTORY_POINTS = 256  # exact (sequence, time) points kept per stream for interpolation
ALL = ">"


def _epoch(text: str) -> float:
    return parse_rfc3339(text).timestamp()


def _stream_time(text: str | None) -> float | None:
    """A stream's first or last message time; None for an empty stream's zero time or one unreadable."""
    if not text or text.startswith("0001-"):
        return None
    try:
        return _epoch(text)
    except ValueError:
        return None


@dataclass
class StreamFacts:
    """What lag needs of a stream: whether it allows direct get, and its first and last message."""

    allow_direct: bool = False
    first_seq: int = 0
    first_t: float | None = None
    last_seq: int = 0
    last_t: float | None = None
    limits: StreamLimits = StreamLimits()

    @classmethod
    def from_info(cls, info: StreamInfo) -> StreamFacts:
        config, state = info.settings, info.current
        limits = StreamLimits(
            discard=config.discard or "old", max_age=max(0, config.max_age) / 1e9,
            max_msgs=max(0, config.max_msgs), max_bytes=max(0, config.max_bytes), messages=max(0, state.messages),
            bytes=max(0, state.bytes), first_seq=max(0, state.first_seq), last_seq=max(0, state.last_seq))
        return cls(config.allow_direct, state.first_seq, _stream_time(state.first_ts),
                   state.last_seq, _stream_time(state.last_ts), limits)

    @property
    def limited(self) -> bool:
        """Whether the stream's limits can remove messages a consumer has not processed."""
        lim = self.limits
        return lim.discard == "old" and (lim.max_age > 0 or lim.max_msgs > 0 or lim.max_bytes > 0)


class Rate:
    """A count's rate a second over a trailing span, from one anchor point kept per key: the
    anchor moves on once it is older than the span, so the rate is over one to two spans."""

    def __init__(self, span: float = 60.0):
        self.span = span
        self.anchors: dict[Hashable, tuple[float, float]] = {}

    def update(self, key: Hashable, at: float, value: float) -> float | None:
        anchor = self.anchors.get(key)
        if anchor is None or value < anchor[1]:  # first seen, or reset (a recreated stream or consumer)
            self.anchors[key] = (at, value)
            return None
        if at - anchor[0] <= 0:
            return None
        rate = (value - anchor[1]) / (at - anchor[0])
        if at - anchor[0] >= self.span:
            self.anchors[key] = (at, value)
        return rate

    def keep(self, keys: Set[Hashable]) -> None:
        self.anchors = {k: v for k, v in self.anchors.items() if k in keys}


@dataclass(frozen=True)
class Found:
    """The first message at or after a sequence that a filter matches (seq None: there is none)."""

    seq: int | None
    t: float | None


class History:
    """A stream's (sequence, time) points read exactly so far, for interpolating the time of a
    sequence that was not read."""

    def __init__(self, keep: int = HISTORY_POINTS):
        self.keep = keep
        self.seqs: list[int] = []
        self.times: list[float] = []

    def add(self, seq: int, t: float) -> None:
        i = bisect.bisect_left(self.seqs, seq)
        if i < len(self.seqs) and self.seqs[i] == seq:
            return
        self.seqs.insert(i, seq)
        self.times.insert(i, t)
        if len(self.seqs) > self.keep:  # floors move forward: the lowest points matter least
            del self.seqs[0], self.times[0]

    def with_ends(self, facts: StreamFacts | None) -> tuple[list[int], list[float]]:
        """The points with the stream's first and last message among them (built once per cycle
        and stream: every estimate of the stream bisects the same lists)."""
        seqs, times = list(self.seqs), list(self.times)
        if facts is not None:
            for s, t in ((facts.first_seq, facts.first_t), (facts.last_seq, facts.last_t)):
                if s and t is not None:
                    i = bisect.bisect_left(seqs, s)
                    if i >= len(seqs) or seqs[i] != s:
                        seqs.insert(i, s)
                        times.insert(i, t)
        return seqs, times

    def estimate(self, seq: int, facts: StreamFacts | None,
                 points: tuple[list[int], list[float]] | None = None) -> float | None:
        """The time of the first message at or after `seq`, interpolated linearly between the
        nearest known points (the stream's first and last message among them); None when the
        stream holds nothing at or after `seq` or nothing is known."""
        seqs, times = points if points is not None else self.with_ends(facts)
        if facts is not None:
            if facts.last_seq and seq > facts.last_seq:
                return None
            seq = max(seq, facts.first_seq)  # removed by limits or interest: the first still there
        if not seqs:
            return None
        i = bisect.bisect_left(seqs, seq)
        if i < len(seqs) and seqs[i] == seq:
            return times[i]
        if i == 0:
            return times[0]  # before every point: the earliest point's time (an older bound)
        if i == len(seqs):
            return times[-1]
        s0, s1, t0, t1 = seqs[i - 1], seqs[i], times[i - 1], times[i]
        return t0 + (t1 - t0) * (seq - s0) / (s1 - s0)


@dataclass
class LagStats:
    """What one cycle's lag collection did (for the log, /metrics and bench)."""

    requests: int = 0
    exact: int = 0
    estimated: int = 0
    denied_streams: list[str] = field(default_factory=list)
    seconds: float = 0.0


Target = tuple[str, tuple[str, ...], int]  # (stream, filter subjects, first sequence to look at)
Read = tuple[str, str, int]  # (stream, one subject, first sequence to look at)


class LagReader:
    """Fills a cycle's lag columns for the consumers of the connection's account."""

    def __init__(self, nc: Client, account: str, *, concurrency: int = 128, rotation: int = 5,
                 every: float = 0.0, timeout: float = READ_TIMEOUT, retry_denied: float = RETRY_DENIED,
                 clock: Callable[[], float] = time.monotonic):
        self.nc = nc
        self.account = account
        self.api = JetStreamAPI(nc, timeout=timeout)
        self.timeout = timeout
        self.rotation = max(1, rotation)
        self.every = every
        self.retry_denied = retry_denied
        self.clock = clock
        self.concurrency = max(1, concurrency)
        self.cache: dict[Target, Found] = {}
        self.history: dict[str, History] = {}
        self.streams: dict[str, StreamFacts] = {}
        self.arrivals: dict[str, float | None] = {}  # stream -> messages arriving a second
        self._stream_rate = Rate()
        self._floor_rate = Rate()
        self.denied: dict[str, float] = {}  # stream -> when reads may be tried again
        self.no_direct: dict[str, float] = {}  # direct gets got no reply: STREAM.MSG.GET until then
        self.cycle = 0
        self._last_refresh: float | None = None
        self.last = LagStats()
        self._points: dict[str, tuple[list[int], list[float]]] = {}  # this cycle's interpolation lists
        self._facts: asyncio.Task[None] | None = None  # STREAM.LIST, begun beside the cycle's sampling
        self._listed_last = False  # the last cycle had consumers of this account (their streams were listed)
        self.listing_failed = False  # the last stream listing failed: `streams` is older than it looks
        # ... with no reply at all: the server does not answer now, and no read is sent this cycle
        # (each would wait out its timeout, and the next cycle with it).
        self.unanswered = False

    def begin(self) -> None:
        """Start the cycle's stream listing beside the sampling, where the last cycle needed one: in
        a cluster that lost a server both wait out the server's gather of the assets it held
        (seconds each), and one after the other they pushed a cycle past its interval."""
        due = self._last_refresh is None or self.clock() - self._last_refresh >= self.every
        if self._facts is None and self._listed_last and due:
            self._facts = asyncio.get_running_loop().create_task(self._stream_facts())

    async def _listed(self) -> None:
        """The stream listing begun for this cycle, or one made now."""
        task, self._facts = self._facts, None
        await (task if task is not None else self._stream_facts())

    # -- reading the server -------------------------------------------------------------------
    async def _stream_facts(self) -> None:
        """Every stream's allow_direct and first/last message, from STREAM.LIST (256 a page)."""
        facts: dict[str, StreamFacts] = {}
        try:
            async for page in self.api.stream_list():
                for info in map(StreamInfo.of, page):
                    name = info.settings.name
                    if name is not None:
                        facts[name] = StreamFacts.from_info(info)
        except (NoReply, JetStreamAPIError, ValueError) as exc:
            log.warning("lag: listing streams failed (%s); may the collector's user publish to "
                        "$JS.API.STREAM.LIST? Ages are estimated from earlier reads meanwhile", exc)
            self.listing_failed, self.unanswered = True, isinstance(exc, NoReply)
            return
        self.streams, self.listing_failed, self.unanswered = facts, False, False
        now = self.clock()
        self.arrivals = {name: self._stream_rate.update(name, now, f.last_seq) for name, f in facts.items()}
        self._stream_rate.keep(set(facts))

    @staticmethod
    def _parse(msg: Msg, direct: bool, subject_api: str) -> Found:
        """A read's reply: the message found, Found(None) when there is none (404), or
        JetStreamAPIError for any other refusal."""
        if direct:
            headers = msg.headers or {}
            status = headers.get("Status")
            if status == "404":
                return Found(None, None)
            if status or "Nats-Time-Stamp" not in headers:
                raise JetStreamAPIError(subject_api, int(status or 0), 0, str(headers.get("Description", "no timestamp")))
            return Found(int(headers["Nats-Sequence"]), _epoch(headers["Nats-Time-Stamp"]))
        reply = json.loads(msg.data)
        err = reply.get("error")
        if err:
            if err.get("code") == 404:
                return Found(None, None)
            raise JetStreamAPIError(subject_api, err.get("code", 0), err.get("err_code", 0), err.get("description", ""))
        message = reply.get("message") or {}
        return Found(int(message["seq"]), _epoch(message["time"]))

    async def _read_all(self, reads: list[Read], stats: LagStats) -> list[Found | Exception]:
        """Reads pipelined over one inbox subscription, `concurrency` at a time (a request each
        with its own reply subject; no per-request timer or task): the first message at or after
        each read's sequence on its subject. A read that gets no reply within the timeout (a
        denied request gets none) comes back as NoReply; one of a stream that went unanswered
        earlier in the same pass is not sent."""
        results: list[Found | Exception] = [NoReply("not sent")] * len(reads)
        if not reads:
            return results
        prefix = self.nc.new_inbox()
        loop = asyncio.get_running_loop()
        waiting: dict[str, asyncio.Future[Msg]] = {}

        async def reply(msg: Msg) -> None:
            fut = waiting.pop(msg.subject[len(prefix) + 1:], None)
            if fut is not None and not fut.done():
                fut.set_result(msg)

        sub = await self.nc.subscribe(prefix + ".*", cb=reply)
        unanswered: set[str] = set()
        try:
            for start in range(0, len(reads), self.concurrency):
                sent: list[tuple[int, bool, str, asyncio.Future[Msg]]] = []
                for i in range(start, min(start + self.concurrency, len(reads))):
                    stream, subject, seq = reads[i]
                    if stream in unanswered or self._is_denied(stream):
                        continue
                    direct = self._direct(stream)
                    api = f"$JS.API.{'DIRECT.GET' if direct else 'STREAM.MSG.GET'}.{check_name('stream', stream)}"
                    fut = waiting[str(i)] = loop.create_future()
                    await self.nc.publish(api, json.dumps({"seq": seq, "next_by_subj": subject}).encode(),
                                          reply=f"{prefix}.{i}")
                    stats.requests += 1
                    sent.append((i, direct, api, fut))
                if not sent:
                    continue
                await self.nc.flush()
                await asyncio.wait([f for *_, f in sent], timeout=self.timeout)
                for i, direct, api, fut in sent:
                    if not fut.done():
                        fut.cancel()
                        waiting.pop(str(i), None)
                        results[i] = NoReply(f"no reply to {api} within {self.timeout:g}s")
                        unanswered.add(reads[i][0])
                        continue
                    try:
                        results[i] = self._parse(fut.result(), direct, api)
                    except (JetStreamAPIError, ValueError, KeyError) as exc:
                        results[i] = exc
        finally:
            await sub.unsubscribe()
        return results

    async def _fetch_all(self, targets: list[Target], stats: LagStats) -> None:
        """Read every target (the earliest over its filter subjects) into the cache. A stream
        whose direct gets go unanswered is read again with STREAM.MSG.GET; one that does not
        answer that either is marked denied and estimated until RETRY_DENIED has passed."""
        targets = [t for t in targets if not self._is_denied(t[0])]
        reads = [(stream, subject, seq) for stream, filters, seq in targets for subject in filters or (ALL,)]
        was_direct = {stream: self._direct(stream) for stream, _, _ in reads}
        results = await self._read_all(reads, stats)
        retry = [i for i, r in enumerate(results) if isinstance(r, NoReply) and was_direct[reads[i][0]]]
        for stream in {reads[i][0] for i in retry}:  # direct get refused: STREAM.MSG.GET may be allowed
            self.no_direct[stream] = self.clock() + self.retry_denied
        for i, again in zip(retry, await self._read_all([reads[i] for i in retry], stats)):
            results[i] = again
        for stream in sorted({reads[i][0] for i, r in enumerate(results) if isinstance(r, NoReply)}):
            self.denied[stream] = self.clock() + self.retry_denied
            stats.denied_streams.append(stream)
            log.warning("lag: reading messages of stream %s got no reply: may the collector's user publish to "
                        "$JS.API.DIRECT.GET.%s and $JS.API.STREAM.MSG.GET.%s? Its ages are estimated for the "
                        "next %.0fs", stream, stream, stream, self.retry_denied)
        at = 0
        for target in targets:
            stream, filters, seq = target
            mine = results[at:at + len(filters or (ALL,))]
            at += len(filters or (ALL,))
            failed = [r for r in mine if isinstance(r, Exception)]
            if failed:
                if not isinstance(failed[0], NoReply):
                    log.warning("lag: reading stream %s at %d failed: %s", stream, seq, failed[0])
                continue
            hits = [f for f in mine if isinstance(f, Found) and f.seq is not None]
            first = min(hits, key=lambda f: f.seq or 0) if hits else Found(None, None)
            self.cache[target] = first
            if first.seq is not None and first.t is not None:
                self.history.setdefault(stream, History()).add(first.seq, first.t)

    def _direct(self, stream: str) -> bool:
        """Read this stream with direct get: it allows it, and direct gets were not refused lately."""
        facts = self.streams.get(stream)
        if facts is None or not facts.allow_direct:
            return False
        until = self.no_direct.get(stream)
        if until is not None and self.clock() >= until:
            del self.no_direct[stream]
            until = None
        return until is None

    def _is_denied(self, stream: str) -> bool:
        until = self.denied.get(stream)
        if until is None:
            return False
        if self.clock() >= until:
            del self.denied[stream]
            return False
        return True

    def _cached(self, target: Target) -> Found | None:
        """The cached read of a target, if it still holds: the message it found is still in the
        stream (a limit may have removed it since; then the first one after it is the oldest)."""
        found = self.cache.get(target)
        if found is None:
            return None
        facts = self.streams.get(target[0])
        if found.seq is not None and facts is not None and found.seq < facts.first_seq:
            return None
        if found.seq is None and facts is not None and facts.last_seq >= target[2]:
            return None  # nothing was there when read; there is now
        return found

    def _turn(self, key: tuple[str, str, str]) -> bool:
        return zlib.crc32("\x1f".join(key).encode()) % self.rotation == self.cycle % self.rotation

    # -- one cycle ----------------------------------------------------------------------------
    async def fill(self, batch: SampleBatch, urgent: Iterable[tuple[str, str, str]] = ()) -> LagStats:
        """Set the cycle's age columns: exact where a read is cached or due (every `urgent`
        consumer, the others in turn), estimated otherwise. Consumers of other accounts (JSZ over
        the system account) are left without ages: this connection cannot read their streams."""
        began = time.monotonic()
        stats = LagStats()
        s = batch.samples
        n = len(s["consumer"])
        urgent = set(urgent)
        now = self.clock()
        refresh = self._last_refresh is None or now - self._last_refresh >= self.every
        rows: list[tuple[int, Target, Target | None, float]] = []
        wanted: dict[Target, bool] = {}
        mine: list[int] = []  # this account's consumers, idle ones too: a full stream leaves them idle
        for i in range(n):
            if s["account"][i] != self.account:
                continue
            mine.append(i)
            pending, in_flight = s["num_pending"][i] or 0, s["num_ack_pending"][i] or 0
            if pending + in_flight <= 0:
                continue
            stream = s["stream"][i]
            filters = batch.filters[i] if i < len(batch.filters) else ()
            unacked = (stream, filters, int(s["ack_floor_stream_seq"][i] or 0) + 1)
            undelivered = (stream, filters, int(s["delivered_stream_seq"][i] or 0) + 1) if pending > 0 else None
            try:
                at = _epoch(s["ts"][i])
            except (ValueError, TypeError):
                continue
            rows.append((i, unacked, undelivered, at))
            due = refresh and ((s["account"][i], stream, s["consumer"][i]) in urgent
                               or self._turn((s["account"][i], stream, s["consumer"][i])))
            for target in (unacked, undelivered):
                if target is not None:
                    wanted[target] = wanted.get(target, False) or due
        if (mine and refresh) or self._facts is not None:  # one begun and not needed after all ends too
            await self._listed()
        self._listed_last = bool(mine)
        if refresh and not self.unanswered:
            self._last_refresh = now
            reads = [t for t, due in wanted.items() if due and self._cached(t) is None]
            await self._fetch_all(reads, stats)
        self.cache = {t: f for t, f in self.cache.items() if t in wanted}
        self._points = {}
        for i, unacked, undelivered, at in rows:
            for target, age_col, kind_col in ((unacked, "oldest_unacked_age_seconds", "oldest_unacked_age_kind"),
                                              (undelivered, "oldest_undelivered_age_seconds",
                                               "oldest_undelivered_age_kind")):
                if target is None:
                    continue
                age, kind = self._age(target, at)
                s[age_col][i], s[kind_col][i] = age, kind
                if kind == EXACT:
                    stats.exact += 1
                elif kind == ESTIMATE:
                    stats.estimated += 1
            loss = self._loss(s, i, unacked, at)
            s["time_to_loss_seconds"][i], s["loss_limit"][i] = (None, None) if loss is None else (loss.seconds,
                                                                                                 loss.limit)
        for i in mine:  # a room is a fact of the last listing only while that listing is the latest tried
            facts = None if self.listing_failed else self.streams.get(s["stream"][i])
            s["stream_room_messages"][i] = None if facts is None else room_before_refused(facts.limits)
        self._floor_rate.keep({(s["stream"][i], s["consumer"][i]) for i, *_ in rows})
        self.cycle += 1
        stats.seconds = time.monotonic() - began
        self.last = stats
        return stats

    def _loss(self, s: dict[str, list[Any]], i: int, unacked: Target, at: float) -> Loss | None:
        """health/loss.py's projection for one consumer of a stream whose limits can remove what it
        has not processed; None for the others."""
        stream = unacked[0]
        facts = self.streams.get(stream)
        if facts is None or not facts.limited:
            return None
        floor = unacked[2] - 1
        floor_rate = self._floor_rate.update((stream, s["consumer"][i]), at, floor)
        return projected_loss(facts.limits, floor, s["oldest_unacked_age_seconds"][i], self.arrivals.get(stream),
                              floor_rate)

    def _age(self, target: Target, at: float) -> tuple[float | None, str | None]:
        found = self._cached(target)
        if found is not None:
            return (None, None) if found.t is None else (max(0.0, at - found.t), EXACT)
        stream = target[0]
        history, facts = self.history.get(stream) or History(), self.streams.get(stream)
        if stream not in self._points:
            self._points[stream] = history.with_ends(facts)
        t = history.estimate(target[2], facts, self._points[stream])
        return (None, None) if t is None else (max(0.0, at - t), ESTIMATE)
