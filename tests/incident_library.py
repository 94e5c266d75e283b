"""The incident library on a real server: every incident and its healthy look-alikes at once, with
real pull clients (the raw pull protocol, honouring pin ids and priority groups), on one
nats-server, judged by the real collector on its default settings.

Each scenario runs healthy first, so jetwatch sees its rhythm; then its incident starts (a
look-alike just goes on). tests/test_incidents.py holds each incident to its deadline and the
look-alikes to silence; `python -m bench.incidents` runs the same library with the look-alikes
going on for 30 minutes and prints the table docs/verdicts.md quotes. The scenarios of a consumer
leader change (`leader_changes`) need a three-node cluster: tests/test_cluster.py runs them on
R3 streams and consumers with the same clients, collector and judging, and so does the bench.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.demo.workers import PullWorker
from jetwatch.store.database import Store
from tests.helpers import collecting, collector_settings, eventually, make_consumer, make_stream, rows

INTERVAL = 5.0  # the collector's default
HEALTHY_FOR = 30.0  # every scenario runs healthy this long before its incident
# The cycle that sees a deadline pass may come an interval later, and a loaded machine adds its own seconds.
SLACK = INTERVAL + 5.0
QUIET = ("OK", "COLLECTING")


class Client(PullWorker):
    """A pull client with the behaviours the library needs beside PullWorker's: `answer` "nak"
    refuses every message; `nak_body` refuses the messages with that body (a poison message);
    `job_s` with `progress_s` works each message that long, reporting progress (+WPI) as it goes;
    `bulk_s` holds acknowledgements and sends them all at once that often."""

    def __init__(self, *args: Any, answer: str = "ack", nak_body: bytes | None = None, job_s: float = 0.0,
                 progress_s: float = 0.0, bulk_s: float = 0.0, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.answer, self.nak_body = answer, nak_body
        self.job_s, self.progress_s, self.bulk_s = job_s, progress_s, bulk_s
        self._bulk_task: asyncio.Task[None] | None = None

    async def finish(self, msg: Msg) -> None:
        if self.answer == "nak" or (self.nak_body is not None and msg.data == self.nak_body):
            await self.nc.publish(msg.reply, b"-NAK")
            return
        if self.job_s:
            done = asyncio.get_running_loop().time() + self.job_s
            while (left := done - asyncio.get_running_loop().time()) > 0:
                await asyncio.sleep(min(left, self.progress_s or left))
                if self.progress_s and done - asyncio.get_running_loop().time() > 0:
                    await self.nc.publish(msg.reply, b"+WPI")
        if self.bulk_s:
            self._unacked.append(msg)
            if self._bulk_task is None:
                self._bulk_task = asyncio.get_running_loop().create_task(self._ack_in_bulk())
            return
        await super().finish(msg)

    async def _ack_in_bulk(self) -> None:
        while True:
            await asyncio.sleep(self.bulk_s)
            await self.ack_held()

    async def stop(self, timeout: float = 10.0) -> None:
        if self._bulk_task is not None:
            self._bulk_task.cancel()
        await super().stop(timeout)


@dataclass
class Running:
    """What an incident acts on."""

    nc: NATS
    api: JetStreamAPI
    stream: str
    subject: str
    config: dict[str, Any]
    clients: list[Client]
    tasks: list[asyncio.Task[Any]]
    collector: Any = None  # the running collector, once it runs
    notes: dict[str, Any] = field(default_factory=dict)  # what an incident saw as it acted

    def judged(self) -> tuple[str, float] | None:
        """The collector's latest verdict of this scenario's consumer and its since (epoch seconds),
        from its memory (no read of the store, which would hold its cycles up); None before the
        first judged cycle."""
        judged = None if self.collector is None else self.collector.judged
        if judged is None:
            return None
        c = judged.consumers
        row = c[(c["stream"] == self.stream) & (c["consumer"] == "work")]
        return None if row.empty else (str(row["verdict"].iloc[0]), row["since"].iloc[0].timestamp())


Incident = Callable[[Running], Awaitable[None]]


@dataclass
class Scenario:
    name: str
    verdict: str | None  # None: a look-alike, nothing may be raised
    deadline: float = 30.0  # from the incident's start
    policy: str | None = None  # a priority policy; its group is "jobs"
    rate: float = 2.0  # messages a second
    burst: int = 0  # or this many messages at once, every 1 / rate seconds
    consumer: dict[str, Any] = field(default_factory=dict)  # consumer config beside the defaults
    clients: list[dict[str, Any]] = field(default_factory=list)  # Client arguments; the first pins first
    incident: Incident | None = None
    says: str = ""  # words the reason must hold once named
    from_start: bool = False  # the incident is the whole run (its deadline counts from the first sample)
    started: float | None = None
    named: float | None = None


async def _stop_acking(r: Running) -> None:
    r.clients[0].acking = False


async def _stop_pulling(r: Running) -> None:
    r.clients[0].stalled = True


async def _all_gone(r: Running) -> None:
    gone = r.clients[0]
    gone.winding_down = True  # pulls no more; its last pull read to its end, everything acknowledged (a clean stop)
    await eventually(lambda: not gone.pulling and gone.stats.acked == gone.stats.received, message="gone: all acked")
    await gone.stop()


async def _nak_everything(r: Running) -> None:
    r.clients[0].answer = "nak"


async def _poison(r: Running) -> None:
    await r.nc.request(r.subject, b"poison", timeout=5)


async def _more_pullers(r: Running) -> None:
    for k in range(3):
        r.clients.append(Client(r.nc, r.stream, "work", name=f"extra-{k}", expires_s=10.0, batch=1).start())


async def _unpin_again_and_again(r: Running) -> None:
    async def unpinning() -> None:
        while True:
            await r.api.unpin(r.stream, "work", "jobs")
            await asyncio.sleep(4.0)

    r.tasks.append(asyncio.create_task(unpinning()))


async def _pause(r: Running) -> None:
    until = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=30)
    await r.api.pause(r.stream, "work", until.isoformat().replace("+00:00", "Z"))


async def _recreate(r: Running) -> None:
    await r.api.delete_consumer(r.stream, "work")
    await r.api.add_consumer(r.stream, r.config)


async def _recreate_from_new(r: Running) -> None:
    await r.api.delete_consumer(r.stream, "work")
    await r.api.add_consumer(r.stream, {**r.config, "deliver_policy": "new"})


async def _recreated_while_gone(r: Running) -> None:
    await _all_gone(r)
    await _recreate(r)


async def _leader(r: Running) -> str:
    try:
        return (await r.api.consumer_info(r.stream, "work")).get("cluster", {}).get("leader", "")
    except Exception:  # no leader during an election: no reply, or an error reply
        return ""


async def _step_down(r: Running) -> None:
    """The consumer's leader steps down (`$JS.API.CONSUMER.LEADER.STEPDOWN`): another replica leads,
    and the pin, kept in the leader's memory only, is gone with no advisory. Returns once a new
    leader leads, a client holds a new pin, and the collector has judged four cycles since."""
    old = await eventually(lambda: _leader(r), timeout=30, message=f"{r.stream}: a consumer leader")
    pins = {w.pin_id for w in r.clients}
    reply = json.loads((await r.nc.request(f"$JS.API.CONSUMER.LEADER.STEPDOWN.{r.stream}.work", b"",
                                           timeout=10)).data)
    assert "error" not in reply, reply
    r.notes["stepped_down"] = time.time()
    new = await eventually(lambda: _leader(r), timeout=30, message=f"{r.stream}: a new consumer leader")
    assert new != old, (old, new)
    await eventually(lambda: any(w.pin_id and w.pin_id not in pins for w in r.clients), timeout=30,
                     message=f"{r.stream}: a new pin after the leader change")
    cycles = r.collector.cycles
    await eventually(lambda: r.collector.cycles >= cycles + 4, timeout=60, message=f"{r.stream}: four cycles more")


async def _stuck_then_step_down(r: Running) -> None:
    await _stop_acking(r)

    def stalled() -> tuple[str, float] | None:
        judged = r.judged()
        return judged if judged is not None and judged[0] == "STALLED" else None

    r.notes["since"] = (await eventually(stalled, timeout=60, message=f"{r.stream}: STALLED before the leader change"))[1]
    await _step_down(r)


async def cluster_ready(server_urls: str, stream: str) -> None:
    """Wait until a freshly started cluster has a meta leader: it accepts an R3 stream."""
    nc = await nats.connect(server_urls.split(","))
    api = JetStreamAPI(nc, timeout=10)

    async def created() -> bool:
        for attempt in (api.add_stream, lambda c: api.stream_info(c["name"])):  # a lost reply: made already
            try:
                await attempt({"name": stream, "subjects": [f"{stream}.>"], "storage": "memory", "num_replicas": 3})
                return True
            except Exception:  # no meta leader yet: an error reply or none
                continue
        return False

    try:
        await eventually(created, timeout=60, message="the cluster accepts an R3 stream")
    finally:
        await nc.close()


def leader_changes() -> dict[str, Scenario]:
    """The scenarios of a consumer leader change, for a three-node cluster (R3 streams and
    consumers: run_library(..., replicas=3)). The pin lives in the consumer leader's memory, so a
    leader change clears it with no advisory and the next pull is pinned afresh (jetwatch infers the
    unpin). That is one re-pin, not a flapping pin, and not a pin holder gone idle: a healthy
    pinned consumer raises nothing. An incident under way stays named through it, never back to
    OK, its since unchanged: a stuck pinned client (the only client, so it takes the new pin too
    and goes on holding work unacknowledged) is STALLED before and after."""
    pinned = {"policy": "pinned_client", "consumer": {"priority_timeout": 120_000_000_000}}
    return {
        "leader": Scenario("a consumer leader change (stepdown) under a pinned client with a standby; both work",
                           None, **pinned, clients=[{}, {}], incident=_step_down),
        "stuckleader": Scenario("a stuck pinned client (no standby), then a consumer leader change", "STALLED",
                                **pinned, clients=[{}], incident=_stuck_then_step_down, says="none acknowledged"),
    }


def library() -> dict[str, Scenario]:
    """Every scenario, by key (the key names its stream). Workers pull with 2 s expiries unless
    said otherwise, as nats-py's fetch does by default."""
    pinned = {"policy": "pinned_client", "consumer": {"priority_timeout": 120_000_000_000}}
    return {
        # incidents
        "stuck": Scenario("a pinned client keeps pulling, stops acknowledging; a standby waits", "STALLED",
                          **pinned, clients=[{}, {}], incident=_stop_acking, says="none acknowledged"),
        "holder": Scenario("the pinned client stops pulling and keeps its pin; a standby waits", "PIN_IDLE",
                           **pinned, clients=[{}, {}], incident=_stop_pulling, says="pinned client has pulled nothing"),
        "gone": Scenario("every puller stops; work arrives", "NO_PULLERS", clients=[{}], incident=_all_gone,
                         says="no client has pulled"),
        "behind": Scenario("a worker falls behind: 10/s arrive, 5/s worked off", "LAGGING", deadline=60.0, rate=10.0,
                           clients=[{"work_s": 0.2, "batch": 1}], from_start=True, says="older"),
        "sawtooth": Scenario("falls behind as a sawtooth: 60 at once every 15 s, about 3/s worked off", "LAGGING",
                             deadline=60.0, rate=1 / 15, burst=60, clients=[{"work_s": 0.33, "batch": 1}],
                             from_start=True, says="older"),
        "fails": Scenario("a worker fails every message: each naked until max_deliver (3), nothing processed",
                          "STALLED", consumer={"max_deliver": 3}, clients=[{}], incident=_nak_everything,
                          says="none acknowledged"),
        "poison": Scenario("a poison message: naked by a worker that processes the rest, until max_deliver (4)",
                           "REDELIVERING", consumer={"max_deliver": 4}, clients=[{"nak_body": b"poison"}],
                           incident=_poison, says="max_deliver"),
        "limit": Scenario("in flight reaches max_ack_pending (20): the worker keeps pulling, acknowledges nothing",
                          "STALLED", consumer={"max_ack_pending": 20}, clients=[{}], incident=_stop_acking,
                          says="max_ack_pending"),
        "waiting": Scenario("pull requests reach max_waiting (3): further pulls are refused", "SATURATED",
                            consumer={"max_waiting": 3}, clients=[{"expires_s": 10.0, "batch": 1}],
                            incident=_more_pullers, says="max_waiting"),
        "flaps": Scenario("the pin moves every 4 s (an operator unpins again and again)", "FLAPPING", **pinned,
                          clients=[{}, {}], incident=_unpin_again_and_again, says="new pins"),
        "paused": Scenario("paused by an operator while work arrives", "PAUSED", clients=[{}], incident=_pause,
                           says="paused"),
        # Deleted and recreated (same name, a new `created`): a new consumer, judged on its own
        # samples only. Its sequences start over (delivered and acknowledged go back to zero, the
        # stream's messages pending again): no verdict, rate, onset or ETA spans the two, and the
        # old one's verdict is neither held nor eased into (until it has enough samples of its own
        # it is COLLECTING, "recreated ..."). Its clients are the old one's, pulling it again at
        # their own rhythm: when none does while work waits, that is named as for any consumer
        # whose pullers went (NO_PULLERS after no_pullers_after, or their pull rhythm doubled).
        # A worker that acknowledges and then pulls again is still redelivered to: the server takes
        # the pull before the acknowledgement sent just ahead of it. Between acknowledgements that
        # keep coming, that is redelivery, never a stall.
        "longjobs": Scenario("one message at a time, 12 s jobs under a 5 s ack_wait", "REDELIVERING", deadline=60.0,
                             rate=1 / 15, consumer={"ack_wait": 5_000_000_000}, clients=[{"work_s": 12.0, "batch": 1}],
                             from_start=True, says="redeliver"),
        "regone": Scenario("deleted and recreated while its workers are gone; the stream's work waits",
                           "NO_PULLERS", clients=[{}], incident=_recreated_while_gone, says="no client has pulled"),
        # healthy look-alikes
        "steady": Scenario("a worker that keeps up", None, clients=[{}]),
        "bursts": Scenario("bursts drained in a sawtooth: 30 at once every 15 s, about 3/s worked off", None,
                           rate=1 / 15, burst=30, clients=[{"work_s": 0.33, "batch": 1}]),
        "standby": Scenario("a pinned client with an idle standby", None, **pinned, clients=[{}, {}]),
        "slow": Scenario("a slow worker that keeps up: 0.3 s a message, 2 a second", None,
                         clients=[{"work_s": 0.3, "batch": 1}]),
        "idle": Scenario("an idle stream, a pull waiting", None, rate=0.0, clients=[{}]),
        **{f"progress{job:.0f}": Scenario(f"a {job:.0f} s job kept alive with +WPI every {every:.0f} s under a 30 s "
                                          "ack_wait", None, rate=1 / (job + 5),
                                          clients=[{"job_s": job, "progress_s": every, "batch": 1}])
           for job, every in ((45.0, 5.0), (70.0, 20.0))},
        **{f"bulk{every:.0f}": Scenario(f"a worker that acknowledges in bulk every {every:.0f} s", None,
                                        consumer={"ack_wait": 60_000_000_000}, clients=[{"bulk_s": every}])
           for every in (15.0, 25.0)},
        **{f"poller{s:.0f}": Scenario(f"a pin holder that polls every {s:.0f} s (priority_timeout 2 min); a standby "
                                      "waits", None, **pinned, rate=1.0,
                                      clients=[{"between_s": s, "batch": 500, "expires_s": 1.0}, {}])
           for s in (40.0, 55.0)},
        "batch": Scenario("a job draining the consumer every 6 minutes, as its metadata declares "
                          "(io.nats.monitor.last-delivery-critical 15m)", None, rate=1.0,
                          consumer={"metadata": {"io.nats.monitor.last-delivery-critical": "15m"}},
                          clients=[{"between_s": 360.0, "batch": 1000, "expires_s": 1.0}]),
        "batchwork": Scenario("a batch worker: 50 pulled every 10 s and acknowledged together every 10 s, "
                              "5 a second arriving (it keeps up, its oldest message always waits out a batch)", None,
                              rate=5.0, consumer={"ack_wait": 60_000_000_000},
                              clients=[{"batch": 50, "between_s": 10.0, "bulk_s": 10.0, "expires_s": 1.0}]),
        "overflow": Scenario("an overflow standby idling on min_pending beside a worker that keeps up", None,
                             policy="overflow", clients=[{}, {"min_pending": 1000}]),
        "ordered": Scenario("one message at a time, always at max_ack_pending = 1", None, rate=1.5,
                            consumer={"max_ack_pending": 1}, clients=[{"work_s": 0.6, "batch": 1}]),
        "recreated": Scenario("deleted and recreated under the same name while its worker pulls (the stream "
                              "replayed)", None, clients=[{}], incident=_recreate),
        "renewed": Scenario("deleted and recreated from new messages only while its worker pulls", None,
                            clients=[{}], incident=_recreate_from_new),
    }


async def _feed(nc: NATS, subject: str, rate: float, stop: asyncio.Event, burst: int = 0) -> None:
    """`rate` messages a second until stopped (published with JetStream acks), or `burst` at once
    `rate` times a second."""
    n = 0
    while not stop.is_set():
        for _ in range(max(burst, 1)):
            await nc.request(subject, str(n).encode(), timeout=5)
            n += 1
        try:
            await asyncio.wait_for(stop.wait(), 1.0 / rate)
        except TimeoutError:
            pass


def _client(nc: NATS, stream: str, s: Scenario, k: int, options: dict[str, Any]) -> Client:
    group = "jobs" if s.policy else None
    return Client(nc, stream, "work", group, name=f"{stream}-{k}", **{"expires_s": 2.0, **options}).start()


@dataclass
class Outcome:
    """What the run saw: each scenario's verdicts over time and the final state."""

    scenarios: dict[str, Scenario]
    streams: dict[str, str]
    changes: dict[str, list[tuple[float, str]]]  # (epoch seconds, verdict) per scenario
    final: dict[str, tuple[str, str]]  # stream -> (verdict, reason)
    etas: dict[str, str]
    sinces: dict[str, float] = field(default_factory=dict)  # stream -> the final verdict's since (epoch seconds)
    notes: dict[str, dict[str, Any]] = field(default_factory=dict)  # scenario -> what its incident saw


async def run_library(server_url: str, db_path: str, uid: str, scenarios: dict[str, Scenario],
                      look_alikes_for: float = 0.0, replicas: int = 1) -> Outcome:
    """Start every scenario, let them run healthy, start the incidents, and watch the verdicts
    until each incident is named or its deadline (and `look_alikes_for` seconds) passes.
    `server_url` may list a cluster's servers (comma-separated); `replicas` is then the streams'
    and consumers' replica count."""
    store = Store(db_path)
    streams = {key: f"{uid}_{key.upper()}" for key in scenarios}
    nc = await nats.connect(server_url.split(","))
    api = JetStreamAPI(nc, timeout=10)
    cluster = {"num_replicas": replicas} if replicas > 1 else {}
    stop = asyncio.Event()
    feeds: list[asyncio.Task[None]] = []
    running: dict[str, Running] = {}
    try:
        for key, s in scenarios.items():
            stream, subject = streams[key], f"{uid}.{key}"
            await make_stream(api, stream, [subject], **cluster)
            config = (await make_consumer(api, stream, "work", s.policy, **s.consumer, **cluster))["config"]
            r = running[key] = Running(nc, api, stream, subject, config, [], [])
            for k, options in enumerate(s.clients):
                r.clients.append(_client(nc, stream, s, k, options))
                if s.policy == "pinned_client" and k == 0:  # the standby pulls once the first holds the pin
                    await _feed_one(nc, subject)
                    await eventually(lambda w=r.clients[0]: w.pin_id, timeout=30, message=f"{key}: pinned")
            if s.rate:
                feeds.append(asyncio.create_task(_feed(nc, subject, s.rate, stop, s.burst)))
        settings = collector_settings(server_url, db_path, tuple(streams.values()), interval=INTERVAL,
                                      **({"request_timeout": 10.0} if replicas > 1 else {}))
        async with collecting(settings) as collector:
            for r in running.values():
                r.collector = collector
            # The verdicts are read from the store once the collector has stopped: a read while it
            # runs in this event loop would hold its cycles up, and the time each verdict was named
            # is the collector's own (verdict_changes.ts).
            began = time.time()
            await asyncio.sleep(HEALTHY_FOR)  # the scenarios' healthy phase, not a wait for a condition
            now = time.time()

            async def start(key: str, s: Scenario) -> None:
                s.started = began if s.from_start else time.time()
                if s.incident is not None:
                    await s.incident(running[key])

            await asyncio.gather(*(start(key, s) for key, s in scenarios.items()))
            deadline = max([now + s.deadline for s in scenarios.values() if s.verdict] or [now]) + SLACK
            # Two more cycles at least, to see that nothing eases; the look-alikes go on as long as asked.
            await asyncio.sleep(max(deadline, now + look_alikes_for) + 2 * INTERVAL - time.time())  # observed time
    finally:
        stop.set()
        await asyncio.gather(*feeds, return_exceptions=True)
        for r in running.values():
            for task in r.tasks:
                task.cancel()
            for w in r.clients:
                await w.stop()
        await nc.close()
    changes = {}
    for key, s in scenarios.items():
        seen = rows(store, "SELECT epoch(ts), to_verdict FROM verdict_changes WHERE stream = ? ORDER BY ts",
                    [streams[key]])
        changes[key] = [(ts, v) for ts, v in seen]
        s.named = next((ts for ts, v in seen if v == s.verdict and ts >= s.started), None) if s.verdict else None
    final = {stream: (verdict, reason) for stream, verdict, reason in
             rows(store, "SELECT stream, verdict, reason FROM verdicts_current", [])}
    etas = dict(rows(store, "SELECT stream, eta_state FROM verdicts_current", []))
    sinces = dict(rows(store, "SELECT stream, epoch(since) FROM verdicts_current", []))
    return Outcome(scenarios, streams, changes, final, etas, sinces, {key: r.notes for key, r in running.items()})


async def _feed_one(nc: NATS, subject: str) -> None:
    await nc.request(subject, json.dumps({"first": True}).encode(), timeout=5)


@dataclass
class Judged:
    """One scenario as the run saw it."""

    key: str
    expected: str  # "-" for a look-alike
    final: str  # the verdict when the run ended
    taken: float | None  # seconds from the incident's start to its verdict
    alarms: list[str]  # every verdict raised but OK and COLLECTING
    later: list[str]  # an incident's verdicts after its observation (a long run: the server moved the pin, ...)
    ok: bool
    reason: str


def judged(outcome: Outcome) -> list[Judged]:
    """Each scenario against its promise: an incident named right within its deadline and never
    eased while observed (until its deadline and two cycles more); a look-alike raising nothing
    for the whole run."""
    table = []
    for key, s in outcome.scenarios.items():
        seen = outcome.changes[key]
        verdict, reason = outcome.final.get(outcome.streams[key], ("-", ""))
        alarms = [v for _, v in seen if v not in QUIET]
        if not s.verdict:
            table.append(Judged(key, "-", verdict, None, alarms, [], alarms == [], reason))
            continue
        until = s.started + s.deadline + SLACK + 2 * INTERVAL
        during = [v for ts, v in seen if ts <= until]
        taken = None if s.named is None else s.named - s.started
        held = during[during.index(s.verdict):] if s.verdict in during else []
        said = verdict != s.verdict or s.says in reason
        ok = taken is not None and taken <= s.deadline + SLACK and set(held) == {s.verdict} and said
        table.append(Judged(key, s.verdict, verdict, taken, alarms, [v for ts, v in seen if ts > until], ok, reason))
    return table
