"""A stalled consumer whose workers went silent: gone or only stopped? On a real server with its
monitoring port, workers that announce their pulls (core/pull_announce.py) take messages and then
either exit holding them (their connections close) or hang holding them (connected, pulling
nothing). The consumer state alone looks the same; CONNZ tells them apart, and the words and the
next step follow: start the gone workers again, look at the hung ones before restarting them."""

from __future__ import annotations

import asyncio

import nats
import pytest

from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.core.pull_announce import PullAnnouncer
from jetwatch.demo.workers import PullWorker
from tests.helpers import collecting, collector_settings, eventually, status_json

pytestmark = pytest.mark.serial  # waits out a stall on the wall clock


async def _workers(url: str, stream: str, names: tuple[str, ...]) -> list[tuple[nats.aio.client.Client, PullWorker]]:
    out = []
    for name in names:
        nc = await nats.connect(url, name=name)
        announcer = PullAnnouncer(nc, stream, "work", name=name)
        # Each message takes a moment: work is in flight between acknowledgements, so the consumer's
        # rhythm is known (a consumer never seen holding work cannot be told from one long job).
        out.append((nc, PullWorker(nc, stream, "work", name=name, batch=5, expires_s=1.0, work_s=0.2,
                                   pull_announcer=announcer).start()))
    return out


async def _produce(nc: nats.aio.client.Client, subjects: tuple[str, ...], stop: asyncio.Event) -> None:
    while not stop.is_set():
        for subject in subjects:
            await nc.publish(subject, b"job")
        await asyncio.sleep(0.5)


def test_workers_gone_and_workers_hung_holding_work_are_told_apart_by_their_connections(nats_server, db_path, uid, run):
    gone, hung = f"{uid}_GONE", f"{uid}_HUNG"

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        for stream in (gone, hung):
            await api.add_stream({"name": stream, "subjects": [f"{stream.lower()}.>"], "storage": "memory"})
            await api.add_consumer(stream, {"durable_name": "work", "ack_policy": "explicit",
                                            "ack_wait": 60_000_000_000})
        stop = asyncio.Event()
        producer = asyncio.get_running_loop().create_task(_produce(nc, (f"{gone.lower()}.job", f"{hung.lower()}.job"),
                                                                   stop))
        stuck: list[tuple[nats.aio.client.Client, PullWorker]] = []
        settings = collector_settings(nats_server.url, db_path, (gone, hung), monitor_url=(nats_server.monitor_url,),
                                      health_window=120.0, health_min_samples=3, health_min_span=2.0, stalled_after=3.0)

        def said() -> dict[str, dict]:
            return {r["stream"]: r for r in status_json(db_path)}

        try:
            async with collecting(settings):  # first: it hears the workers' first announcements
                exiting = await _workers(nats_server.url, gone, ("worker-a", "worker-b"))
                stuck += await _workers(nats_server.url, hung, ("worker-c",))
                await eventually(lambda: {s: r["verdict"] for s, r in said().items()} == {gone: "OK", hung: "OK"},
                                 timeout=60, message="both consumers worked and OK")
                for _, worker in exiting + stuck:
                    worker.acking = False  # each takes work and keeps it
                # Each consumer has work held (which of its workers holds it is the server's choice).
                await eventually(lambda: all(any(w.stats.received > w.stats.acked for _, w in group)
                                             for group in (exiting, stuck)), timeout=30,
                                 message="each consumer's workers holding messages")
                stop.set()
                for wnc, worker in exiting:  # they exit holding them: their connections close
                    await worker.stop()
                    await wnc.close()
                for _, worker in stuck:  # it hangs holding them: connected, pulling nothing
                    worker.stalled = True

                seen: set[tuple[str, str]] = set()

                def told() -> dict[str, dict] | None:
                    now = said()
                    seen.update((r["verdict"], r["reason"][:200]) for r in now.values())
                    return now if all(now[s]["verdict"] == "STALLED" and "CONNZ:" in now[s]["reason"]
                                      for s in (gone, hung)) else None

                try:
                    found = await eventually(told, timeout=60, message="both STALLED, told apart by CONNZ")
                except AssertionError:
                    raise AssertionError(sorted(seen)[-4:]) from None
                assert "worker-a, worker-b gone (their connections closed)" in found[gone]["reason"], found[gone]
                assert "start them again" in found[gone]["next_step"], found[gone]
                assert "worker-c still connected: stopped, not gone" in found[hung]["reason"], found[hung]
                assert "look at what they wait on" in found[hung]["next_step"], found[hung]
        finally:
            stop.set()
            producer.cancel()
            for wnc, worker in stuck:
                await worker.stop()
                await wnc.close()
            await nc.close()

    run(scenario())
