"""The incident library on a real server: real pull clients (the raw pull protocol, honouring pin
ids), the real collector on its default settings (a 5 s interval, the default thresholds), every
incident and its healthy look-alikes at the same time on one nats-server. Each incident must be
named right within its deadline from its start and never eased while it lasts; the look-alikes
must raise nothing. The same rules are specified over minutes of modelled behaviour in
tests/test_health.py; this is them against the server's own numbers and clocks."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import nats
import pytest

from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.demo.workers import PullWorker
from jetwatch.store.database import Store
from tests.helpers import collecting, collector_settings, eventually, make_consumer, make_stream, rows

INTERVAL = 5.0  # the collector's default
HEALTHY_FOR = 30.0  # every scenario runs healthy this long first: jetwatch sees each consumer's rhythm
# The cycle that sees the deadline pass may come an interval later, a client's last pull request
# may hold the condition off until it expires, and a loaded machine adds its own seconds.
SLACK = 2 * INTERVAL + 5.0


@dataclass
class Scenario:
    name: str
    verdict: str | None  # None: a look-alike, nothing may be raised
    deadline: float = 30.0
    pinned: bool = False
    rate: float = 2.0  # messages a second
    workers: list[PullWorker] = field(default_factory=list)
    started: float | None = None
    named: float | None = None


async def _feed(nc, subject: str, rate: float, stop: asyncio.Event) -> None:
    """`rate` messages a second until stopped (published with JetStream acks)."""
    n = 0
    while not stop.is_set():
        await nc.request(subject, str(n).encode(), timeout=5)
        n += 1
        try:
            await asyncio.wait_for(stop.wait(), 1.0 / rate)
        except asyncio.TimeoutError:
            pass


@pytest.mark.incidents
@pytest.mark.serial  # its deadlines are wall-clock seconds: it runs alone, after the parallel lane
def test_each_incident_is_named_in_time_beside_its_look_alikes(nats_server, db_path, uid, run):
    store = Store(db_path)
    scenarios = {
        "stuck": Scenario("a pinned client keeps pulling, stops acknowledging; a standby waits", "STALLED",
                          pinned=True),
        "holder": Scenario("the pinned client stops pulling and keeps its pin; a standby waits", "PIN_IDLE",
                           pinned=True),
        "gone": Scenario("every puller stops; work arrives", "NO_PULLERS"),
        "behind": Scenario("a worker falls behind: 10/s arrive, 5/s worked off", "LAGGING", deadline=60.0,
                           rate=10.0),
        "steady": Scenario("a worker that keeps up", None),
        "standby": Scenario("a pinned client with an idle standby", None, pinned=True),
        "slow": Scenario("a slow worker that keeps up: 0.3 s a message, 2 a second", None),
        "idle": Scenario("an idle stream, a pull waiting", None, rate=0.0),
    }
    streams = {key: f"{uid}_{key.upper()}" for key in scenarios}

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        stop = asyncio.Event()
        feeds = []
        try:
            for key, s in scenarios.items():
                stream = streams[key]
                await make_stream(api, stream, [f"{uid}.{key}"])
                await make_consumer(api, stream, "work", "pinned_client" if s.pinned else None, timeout_s=120)
                group = "jobs" if s.pinned else None
                s.workers.append(PullWorker(nc, stream, "work", group, name=f"{key}-a", expires_s=2.0,
                                            work_s=0.2 if key == "behind" else 0.3 if key == "slow" else 0.0,
                                            batch=1 if key in ("behind", "slow") else 10).start())
                if s.rate:
                    feeds.append(asyncio.create_task(_feed(nc, f"{uid}.{key}", s.rate, stop)))
                if s.pinned:  # the standby pulls in the group once the first client holds the pin
                    await eventually(lambda w=s.workers[0]: w.pin_id, timeout=30, message=f"{key}: pinned")
                    s.workers.append(PullWorker(nc, stream, "work", group, name=f"{key}-b", expires_s=2.0).start())
            settings = collector_settings(nats_server.url, db_path, tuple(streams.values()), interval=INTERVAL)
            async with collecting(settings):
                await asyncio.sleep(HEALTHY_FOR)  # noqa: the scenarios' healthy phase, not a wait for a condition
                now = time.monotonic()
                for key in ("stuck", "holder", "gone", "behind"):
                    scenarios[key].started = now
                scenarios["stuck"].workers[0].acking = False
                scenarios["holder"].workers[0].stalled = True
                gone = scenarios["gone"].workers[0]
                gone.stalled = True  # pulls no more; everything it received is acknowledged (a clean stop)
                await eventually(lambda: gone.stats.acked == gone.stats.received, message="gone: all acked")
                await gone.stop()
                # "behind" was at 10/s arriving, 5/s worked off from the start: its incident is the
                # whole run; it must be named once its rhythm shows it (see deadline).
                scenarios["behind"].started = now - HEALTHY_FOR

                def current() -> dict[str, str]:
                    got = rows(store, "SELECT stream, verdict FROM verdicts_current", [])
                    return {stream: verdict for stream, verdict in got}

                async def watch() -> None:
                    while any(s.verdict and s.named is None for s in scenarios.values()):
                        verdicts = current()
                        for key, s in scenarios.items():
                            if s.verdict and s.named is None and verdicts.get(streams[key]) == s.verdict:
                                s.named = time.monotonic()
                        await asyncio.sleep(0.5)

                latest = max(s.started + s.deadline for s in scenarios.values() if s.verdict) + SLACK
                try:
                    await asyncio.wait_for(watch(), max(latest - time.monotonic(), 1.0))
                except asyncio.TimeoutError:
                    pass
                await asyncio.sleep(2 * INTERVAL)  # noqa: two more cycles, to see nothing eases
                final = current()
                etas = dict(rows(store, "SELECT stream, eta_state FROM verdicts_current", []))
        finally:
            stop.set()
            await asyncio.gather(*feeds, return_exceptions=True)
            for s in scenarios.values():
                for w in s.workers:
                    await w.stop()
            await nc.close()

        report = []
        for key, s in scenarios.items():
            changes = rows(store, "SELECT to_verdict FROM verdict_changes WHERE stream = ? ORDER BY ts",
                           [streams[key]])
            seen = [v for (v,) in changes]
            if s.verdict:
                taken = None if s.named is None else s.named - s.started
                report.append(f"{s.name}: {s.verdict} after {taken if taken is None else round(taken, 1)} s")
                assert s.named is not None, (s.name, seen)
                assert taken <= s.deadline + SLACK, (s.name, taken)
                after_named = seen[seen.index(s.verdict):]
                assert set(after_named) == {s.verdict} and final[streams[key]] == s.verdict, \
                    (s.name, "eased while it lasts", seen)
            else:
                alarms = [v for v in seen if v not in ("OK", "COLLECTING")]
                report.append(f"{s.name}: {alarms or 'nothing raised'}")
                assert alarms == [], (s.name, seen)
        assert etas[streams["gone"]] == "no pullers", "no drain time where nobody pulls"
        print("\nINCIDENTS\n" + "\n".join(report))

    run(scenario())
