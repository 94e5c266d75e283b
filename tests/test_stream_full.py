"""A stream full under discard new (health/loss.py `room_before_refused`, the STREAM_FULL verdict):
the room as arithmetic, table-driven, then a real server refusing publishes to two full streams
while their consumers, caught up, look idle; beside them the look-alikes (a discard-new stream with
room, a discard-old stream rolling at its limit) stay quiet, and a purge makes room again."""

from __future__ import annotations

import asyncio
import json

import nats
import pytest

from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.demo.workers import PullWorker
from jetwatch.health.loss import StreamLimits, room_before_refused
from jetwatch.store.database import Store
from tests.helpers import collecting, collector_settings, eventually, make_consumer, make_stream, rows, status_json


@pytest.mark.parametrize("limits,expected", [
    # max_msgs: what is left of it
    (StreamLimits(discard="new", max_msgs=100, messages=40), 60.0),
    (StreamLimits(discard="new", max_msgs=100, messages=100), 0.0),
    # max_bytes in messages of the mean size: 6,000 B free at 100 B a message
    (StreamLimits(discard="new", max_bytes=10_000, messages=40, bytes=4_000), 60.0),
    # less than one more message fits: full
    (StreamLimits(discard="new", max_bytes=10_000, messages=99, bytes=9_950), pytest.approx(50 / (9_950 / 99))),
    # both limits: the tighter
    (StreamLimits(discard="new", max_msgs=50, max_bytes=10_000, messages=40, bytes=4_000), 10.0),
    # an empty stream with a size limit: all of it
    (StreamLimits(discard="new", max_bytes=10_000), None),
    # discard old removes old messages instead, and no limit refuses nothing
    (StreamLimits(discard="old", max_msgs=100, messages=100), None),
    (StreamLimits(discard="new", messages=100), None),
])
def test_room_before_a_full_stream_refuses(limits, expected):
    assert room_before_refused(limits) == expected


FULL = "STREAM_FULL"


@pytest.mark.parametrize("mode", ["list", "jsz"])
def test_a_full_stream_refusing_publishes_is_named_while_its_consumers_look_idle(nats_server, db_path, uid, run, mode):
    store = Store(db_path)
    sampling = {"monitor_url": (nats_server.monitor_url,)} if mode == "jsz" else {}
    streams = {  # name -> its limits, how many 100-byte messages are published to it
        f"{uid}_FULLMSGS": ({"discard": "new", "max_msgs": 20}, 25),
        f"{uid}_FULLBYTES": ({"discard": "new", "max_bytes": 3_000}, 40),
        f"{uid}_ROOMY": ({"discard": "new", "max_msgs": 1_000}, 20),
        f"{uid}_ROLLING": ({"discard": "old", "max_msgs": 20}, 40),
    }
    full = {f"{uid}_FULLMSGS", f"{uid}_FULLBYTES"}
    refused: dict[str, str] = {}

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        workers = []
        for stream, (limits, count) in streams.items():
            await make_stream(api, stream, [f"{stream.lower()}.>"], **limits)
            await make_consumer(api, stream, "work")
            for _ in range(count):
                reply = json.loads((await nc.request(f"{stream.lower()}.job", b"x" * 100, timeout=5)).data)
                if "error" in reply:
                    refused[stream] = reply["error"]["description"]
            workers.append(PullWorker(nc, stream, "work", name=stream, batch=10).start())
        try:
            async with collecting(collector_settings(nats_server.url, db_path, tuple(streams), **sampling)):
                def verdicts() -> dict[str, str]:
                    return dict(rows(store, "SELECT stream, verdict FROM verdicts_current"))

                await eventually(lambda: {s for s, v in verdicts().items() if v == FULL} == full, timeout=60,
                                 message="both full streams named STREAM_FULL")
                caught_up = rows(store, "SELECT stream, num_pending, num_ack_pending FROM consumer_current")
                assert {s: (p, a) for s, p, a in caught_up if s in full} == {s: (0, 0) for s in full}
                said = {r["stream"]: r for r in status_json(db_path)}
                for stream in full:
                    assert said[stream]["stream_room_messages"] < 1, said[stream]  # not one more fits
                    assert "every publish to it is refused" in said[stream]["reason"], said[stream]
                for stream in set(streams) - full:
                    assert said[stream]["verdict"] != FULL and said[stream]["level"] != "critical", said[stream]

                # Room made: the stream takes publishes again and the verdict goes.
                await api.request(f"STREAM.PURGE.{uid}_FULLMSGS", {})
                await eventually(lambda: verdicts()[f"{uid}_FULLMSGS"] != FULL, timeout=60,
                                 message="the purged stream no longer STREAM_FULL")
                assert verdicts()[f"{uid}_FULLBYTES"] == FULL
        finally:
            await asyncio.gather(*(w.stop() for w in workers), return_exceptions=True)
            await nc.close()

    run(scenario())
    # The server's own words for what the verdict says publishers get.
    assert refused == {f"{uid}_FULLMSGS": "maximum messages exceeded",
                       f"{uid}_FULLBYTES": "maximum bytes exceeded"}, refused


def test_a_stream_listing_that_fails_leaves_no_room_standing_from_an_older_one(tmp_path, run):
    """The room is a fact of the latest listing: when the next one fails (the server does not
    answer), the consumer has no room figure, rather than the old "full" held for as long as
    listings fail (a stream purged meanwhile would stay STREAM_FULL)."""
    import signal

    from jetwatch.collectors.consumer_list import ConsumerListCollector
    from jetwatch.collectors.consumer_state import Scope
    from jetwatch.collectors.filters import NameFilter
    from jetwatch.collectors.lag import LagReader
    from jetwatch.core.clock import rfc3339, utcnow
    from jetwatch.core.embedded_server import NatsServer

    server = NatsServer(store_dir=tmp_path / "js").start()

    async def scenario() -> tuple[object, object]:
        nc = await nats.connect(server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, "FULL", ["full.>"], discard="new", max_msgs=3)
        await make_consumer(api, "FULL", "work")
        for _ in range(3):
            await nc.request("full.x", b"x", timeout=5)
        sampler = ConsumerListCollector(api, Scope("$G"), NameFilter(include_streams=("FULL",)),
                                        lambda: rfc3339(utcnow()))
        reader = LagReader(nc, "$G", timeout=1.0)
        listed = await sampler.collect()
        await reader.fill(listed)
        later = await sampler.collect()
        assert server.proc is not None
        server.proc.send_signal(signal.SIGSTOP)
        try:
            await reader.fill(later)
        finally:
            server.proc.send_signal(signal.SIGCONT)
        await nc.close()
        return listed.samples["stream_room_messages"][0], later.samples["stream_room_messages"][0]

    try:
        full, unknown = run(scenario())
    finally:
        server.stop()
    assert (full, unknown) == (0.0, None)
