"""The consumers a server makes for a mirror or a source of a stream are no one's workers: a stream
mirrored and sourced, with a user's consumer beside them, shows exactly the user's consumer, in
both sampling modes, and no red verdict. (The issue expected them listed as `JS_SRC_*` and
`JS_MIRROR_*`: nats-server 2.15 lists neither in CONSUMER.LIST nor in /jsz, and this holds it.)"""

from __future__ import annotations

import nats
import pytest

from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.demo.workers import PullWorker
from jetwatch.store.database import Store
from tests.helpers import collecting, collector_settings, eventually, make_consumer, make_stream, publish, rows


@pytest.mark.parametrize("mode", ["list", "jsz"])
def test_a_mirror_and_a_source_add_no_consumer_and_no_verdict(nats_server, db_path, uid, run, mode):
    store = Store(db_path)
    origin = f"{uid}_ORIGIN"
    extra = {"monitor_url": (nats_server.monitor_url,)} if mode == "jsz" else {}
    settings = collector_settings(nats_server.url, db_path, (origin, f"{uid}_MIRROR", f"{uid}_SOURCED"), **extra)

    async def scenario() -> list[tuple[str, str, str]]:
        nc = await nats.connect(nats_server.url)
        api = JetStreamAPI(nc)
        await make_stream(api, origin, [f"{uid.lower()}.origin.>"])
        await api.add_stream({"name": f"{uid}_MIRROR", "mirror": {"name": origin}, "storage": "memory"})
        await api.add_stream({"name": f"{uid}_SOURCED", "sources": [{"name": origin}], "storage": "memory"})
        await make_consumer(api, origin, "work")
        worker = PullWorker(nc, origin, "work", name="w", batch=5).start()
        await publish(nc, f"{uid.lower()}.origin.x", 30)
        try:
            async with collecting(settings) as collector:
                start = collector.cycles
                await eventually(lambda: collector.cycles >= start + 10, message="ten cycles judged")
                await eventually(lambda: rows(store, "SELECT num_pending FROM consumer_current WHERE stream = ?",
                                              [origin]) == [(0,)], message="the worker caught up")
                return rows(store, "SELECT stream, consumer, verdict FROM verdicts_current ORDER BY stream")
        finally:
            await worker.stop()
            await nc.close()

    judged = run(scenario())
    assert [(s, c) for s, c, _ in judged] == [(origin, "work")], judged
    assert judged[0][2] not in ("NO_PULLERS", "STALLED", "NO_LEADER", "API_UNAVAILABLE"), judged
