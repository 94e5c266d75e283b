"""The pull workers the demo and the tests drive: they stop when asked, whatever is arriving."""

from __future__ import annotations

import nats

from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.demo.workers import PullWorker
from tests.helpers import eventually, make_consumer, make_stream


def test_a_worker_stops_while_messages_keep_arriving(nats_server, uid, run):
    """On Python 3.11 a cancel that lands as a message arrives is swallowed by the `wait_for` in
    nats-py's `next_msg`; a worker that relied on the cancel alone pulled on, and its `stop()`
    (awaited by most tests' teardown) waited for ever. Unacked work keeps every pull busy."""
    stream = f"{uid}_STOPS"

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.stops"])
        await make_consumer(api, stream, "c", ack_wait=1_000_000_000)  # unacked work comes back in 1 s
        for i in range(300):
            await nc.publish(f"{uid}.stops", str(i).encode())
        await nc.flush()
        for k in range(25):
            w = PullWorker(nc, stream, "c", name=f"w{k}", batch=5, expires_s=0.5).start()
            w.acking = False
            before = w.stats.received
            await eventually(lambda: w.stats.received > before, timeout=30, message=f"worker {k} receiving")
            await w.stop(timeout=10)  # raises if the loop outlives it
        await nc.close()

    run(scenario())
