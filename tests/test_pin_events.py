"""Pin history against a real server with real pinned workers."""

from __future__ import annotations

import nats

from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.demo.workers import PullWorker
from jetwatch.store.database import Store
from tests.helpers import collecting, collector_settings, eventually, make_consumer, make_stream, publish, rows

PIN_ROWS = "SELECT event, pinned_id, reason, source, group_name FROM pin_events WHERE stream = ? AND consumer = ? ORDER BY ts, event DESC"


def test_stalled_pinned_client_yields_timeout_unpin_then_new_pin(nats_server, db_path, uid, run):
    stream, consumer = f"{uid}_weird-name_1", "c-1"
    store = Store(db_path)

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.work"])
        await make_consumer(api, stream, consumer, "pinned_client", timeout_s=2.0)
        async with collecting(collector_settings(nats_server.url, db_path, (stream,))):
            a = PullWorker(nc, stream, consumer, "jobs", name="a").start()
            await publish(nc, f"{uid}.work", 5)
            await eventually(lambda: a.pin_id, message="worker a pinned")
            first_pin = a.pin_id
            b = PullWorker(nc, stream, consumer, "jobs", name="b").start()
            a.stalled = True
            await publish(nc, f"{uid}.work", 5)
            await eventually(lambda: b.pin_id, message="worker b pinned after a stalled")
            await eventually(lambda: len(rows(store, PIN_ROWS, [stream, consumer])) >= 3,
                             message="pin history rows")
            history = rows(store, PIN_ROWS, [stream, consumer])
            assert history[0] == ("pinned", first_pin, None, "advisory", "jobs")
            assert history[1] == ("unpinned", None, "timeout", "advisory", "jobs")
            assert history[2] == ("pinned", b.pin_id, None, "advisory", "jobs")
            latest = "SELECT stream, consumer FROM consumer_latest WHERE pinned_id = ?"
            assert await eventually(lambda: rows(store, latest, [b.pin_id]),
                                    message="sampled state shows b's pin") == [(stream, consumer)]
            await a.stop()
            await b.stop()
        await nc.close()

    run(scenario())


def test_admin_unpin_records_admin_reason_in_pin_history(nats_server, db_path, uid, run):
    stream, consumer = f"{uid}_S", "orders"
    store = Store(db_path)

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid}.work"])
        await make_consumer(api, stream, consumer, "pinned_client", timeout_s=30.0)
        async with collecting(collector_settings(nats_server.url, db_path, (stream,))):
            a = PullWorker(nc, stream, consumer, "jobs", name="a").start()
            b = PullWorker(nc, stream, consumer, "jobs", name="b").start()
            await publish(nc, f"{uid}.work", 3)
            await eventually(lambda: a.pin_id or b.pin_id, message="a pin")
            await api.unpin(stream, consumer, "jobs")
            await publish(nc, f"{uid}.work", 3)
            await eventually(lambda: len(rows(store, PIN_ROWS, [stream, consumer])) >= 3,
                             message="unpin and new pin stored")
            history = rows(store, PIN_ROWS, [stream, consumer])
            assert [h[0] for h in history[:3]] == ["pinned", "unpinned", "pinned"]
            assert history[1][2] == "admin"
            assert history[0][1] != history[2][1]
            assert all(h[3] == "advisory" for h in history)
            await a.stop()
            await b.stop()
        await nc.close()

    run(scenario())
