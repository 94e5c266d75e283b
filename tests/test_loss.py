"""Time to data loss (health/loss.py): the projection as arithmetic, table-driven, then against a
real server whose limits remove what a slow consumer has not processed: the projected time of
the first loss beside the time the server was seen removing it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import nats
import pytest
from streamlit.testing.v1 import AppTest

from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.demo.workers import PullWorker
from jetwatch.health.loss import StreamLimits, projected_loss, time_to_loss
from jetwatch.store.database import Store
from tests.helpers import collecting, collector_settings, eventually, make_consumer, make_stream, rows
from tests.test_dashboard import APP

AGE = StreamLimits(max_age=60.0, messages=50, first_seq=1, last_seq=50)
COUNT = StreamLimits(max_msgs=100, messages=40, first_seq=1, last_seq=40)
BYTES = StreamLimits(max_bytes=10_000, messages=40, bytes=4_000, first_seq=1, last_seq=40)  # 100 B a message


@pytest.mark.parametrize("limits,floor,age,arrivals,floor_rate,expected", [
    # max_age: the floor's message ages at 1 - F/R: (60 - 20) / (1 - 2/4)
    (AGE, 10, 20.0, 4.0, 2.0, 80.0),
    # nothing acknowledged: it ages with the clock
    (AGE, 10, 20.0, 4.0, 0.0, 40.0),
    # keeping pace (or faster): the floor's message keeps its age, nothing is lost
    (AGE, 10, 20.0, 4.0, 4.0, None),
    # nothing arrives and nothing is acknowledged: the clock alone
    (AGE, 10, 50.0, 0.0, 0.0, 10.0),
    # max_msgs: 60 fit, 10 before the floor's message, the front gains 4 - 1 a second: (60 + 10) / 3
    (COUNT, 10, None, 4.0, 1.0, 70 / 3),
    # max_bytes in messages of the mean size: 6,000 B free = 60 messages, the same as above
    (BYTES, 10, None, 4.0, 1.0, 70 / 3),
    # both: the sooner
    (StreamLimits(max_age=20.0, max_msgs=100, messages=40, first_seq=1, last_seq=40), 10, 15.0, 4.0, 1.0,
     5 / 0.75),
    # the front already passed the floor: lost now
    (StreamLimits(max_msgs=100, messages=100, first_seq=30, last_seq=129), 10, None, 4.0, 1.0, 0.0),
    # discard new: publishers are refused, nothing is removed
    (StreamLimits(discard="new", max_msgs=100, messages=40, first_seq=1, last_seq=40), 10, None, 4.0, 1.0, None),
    # nothing unacknowledged
    (COUNT, 40, None, 4.0, 1.0, None),
    # rates not known yet
    (COUNT, 10, None, None, 1.0, None),
    # no limits
    (StreamLimits(messages=40, first_seq=1, last_seq=40), 10, 5.0, 4.0, 1.0, None),
])
def test_time_to_loss(limits, floor, age, arrivals, floor_rate, expected):
    got = time_to_loss(limits, floor, age, arrivals, floor_rate)
    assert got == expected if expected is None else got == pytest.approx(expected)


@pytest.mark.parametrize("limits,floor,age,expected", [
    (AGE, 10, 20.0, "max_age"),
    (COUNT, 10, None, "max_msgs"),
    (BYTES, 10, None, "max_bytes"),
    # both: the one that removes the floor's message first (max_age here)
    (StreamLimits(max_age=20.0, max_msgs=100, messages=40, first_seq=1, last_seq=40), 10, 15.0, "max_age"),
    # the tighter of max_msgs and max_bytes: 10 messages fit by count, 60 by size
    (StreamLimits(max_msgs=50, max_bytes=10_000, messages=40, bytes=4_000, first_seq=1, last_seq=40), 10, None,
     "max_msgs"),
    # already removed: what removed it is not told after the fact, so the limits it has
    (StreamLimits(max_age=60.0, max_msgs=100, messages=100, first_seq=30, last_seq=129), 10, None,
     "max_age or max_msgs"),
])
def test_the_projected_loss_names_the_limit_that_makes_it(limits, floor, age, expected):
    loss = projected_loss(limits, floor, age, 4.0, 1.0)
    assert loss is not None and loss.limit == expected


@pytest.mark.serial  # compares projected and observed times: it runs after the parallel lane, on a worker of its own
def test_a_slow_consumer_on_limited_streams_is_named_losing_before_the_loss_it_projects(nats_server, db_path,
                                                                                      uid, run, monkeypatch):
    """Two streams, one with max_age 30 s and one with max_msgs 120, 5 messages a second, a
    worker taking one a second: LOSING, and the loss the collector projected at its first
    projection happens when the server removes the floor's message (within a few seconds)."""
    store = Store(db_path)
    streams = {"age": (f"{uid}_AGE", {"max_age": 30_000_000_000}), "count": (f"{uid}_COUNT", {"max_msgs": 120})}

    async def scenario() -> dict[str, tuple[float, float]]:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        stop = asyncio.Event()
        workers, feeds = [], []
        observed: dict[str, float] = {}

        async def feed(subject: str) -> None:
            while not stop.is_set():
                await nc.request(subject, b"x", timeout=5)
                try:
                    await asyncio.wait_for(stop.wait(), 0.2)
                except TimeoutError:
                    pass

        async def lost(key: str, worker: PullWorker) -> bool:
            """The stream no longer holds the message the worker takes next (it works them in
            order, one at a time): the limits removed it unprocessed. (The server moves the ack
            floor along with what it removes, so the floor alone does not show a loss.)"""
            first = (await api.stream_info(streams[key][0]))["state"]["first_seq"]
            if first > max(worker.stats.stream_seqs, default=0) + 1 and key not in observed:
                observed[key] = time.time()
            return key in observed

        try:
            for key, (stream, limits) in streams.items():
                await make_stream(api, stream, [f"{uid}.{key}"], **limits)
                await make_consumer(api, stream, "work")
                workers.append(PullWorker(nc, stream, "work", name=key, batch=1, work_s=1.0).start())
                feeds.append(asyncio.create_task(feed(f"{uid}.{key}")))
            async with collecting(collector_settings(nats_server.url, db_path, tuple(s for s, _ in streams.values()),
                                                     interval=1.0)):
                async def both() -> bool:
                    seen = [await lost(key, worker) for key, worker in zip(streams, workers)]
                    return all(seen)

                await eventually(both, timeout=90, interval=0.25, message="a loss on each stream")
                await eventually(lambda: {v for (v,) in rows(store, "SELECT verdict FROM verdicts_current")} ==
                                 {"LOSING"}, timeout=30, message="both LOSING")
        finally:
            stop.set()
            await asyncio.gather(*feeds, return_exceptions=True)
            for w in workers:
                await w.stop()
            await nc.close()
        projected = {}
        for key, (stream, _) in streams.items():
            # The projection made once both rates had ten seconds of history.
            first = rows(store, "SELECT epoch(ts), time_to_loss_seconds FROM samples WHERE stream = ? "
                                "AND time_to_loss_seconds > 0 ORDER BY ts LIMIT 1 OFFSET 10", [stream])
            at, ahead = first[0]
            projected[key] = (at + ahead, observed[key], ahead)
        return projected

    projected = run(scenario())
    print("\nprojected - observed loss (s), projected that far ahead (s):",
          {k: (round(w - s, 1), round(a, 1)) for k, (w, s, a) in projected.items()})
    for key, (when, seen, ahead) in projected.items():
        # A rate-based projection: right to a share of how far ahead it looks, and the server's
        # limit checks and the test's polling add a few seconds.
        assert abs(when - seen) <= 0.25 * ahead + 4.0, (key, "projected", when, "observed", seen, "ahead", ahead)
    # Each names the limit that makes its loss.
    losing = dict(rows(store, "SELECT stream, reason FROM verdicts_current"))
    assert "the stream's max_age remove" in losing[streams["age"][0]], losing
    assert "the stream's max_msgs remove" in losing[streams["count"][0]], losing

    # Said where on-call looks: `status --json`, the Consumer page.
    out = subprocess.run([sys.executable, "-m", "jetwatch", "status", "--db", db_path, "--json"], capture_output=True,
                         text=True, timeout=120, check=False)
    said = {c["stream"]: c for c in json.loads(out.stdout)}
    assert {said[s]["verdict"] for s, _ in streams.values()} == {"LOSING"}, out.stdout[:500]
    assert all(said[s]["time_to_loss_seconds"] is not None for s, _ in streams.values())
    for k in [k for k in os.environ if k.startswith("JETWATCH_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("JETWATCH_DB", db_path)
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["stream"], at.query_params["consumer"] = streams["age"][0], "work"
    at.run()
    at.switch_page("views/consumer.py").run()
    assert not at.exception, [e.message for e in at.exception]
    shown = {m.label: m.value for m in at.metric}
    assert shown["Time to loss"] == "losing now" or shown["Time to loss"].startswith("~"), shown
