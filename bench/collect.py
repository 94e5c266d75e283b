"""Collector: a full sample of N consumers (discover, fetch, parse, store) versus the baseline of
one CONSUMER.INFO request per consumer (fetch only), against a real local nats-server."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import nats

from jetwatch.collectors.consumer_list import ConsumerListCollector
from jetwatch.collectors.consumer_state import Scope
from jetwatch.collectors.filters import NameFilter
from jetwatch.demo.server import NatsServer
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.store import writes
from jetwatch.store.database import Store


async def main(consumers: int, streams: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = NatsServer(store_dir=Path(tmp) / "js").start()
        try:
            nc = await nats.connect(server.url)
            api = JetStreamAPI(nc, timeout=30)
            per_stream = consumers // streams
            began = time.perf_counter()
            for s in range(streams):
                await api.add_stream({"name": f"B{s}", "subjects": [f"b{s}.>"], "storage": "memory"})
                await asyncio.gather(*(api.add_consumer(f"B{s}", {"durable_name": f"c{i}", "ack_policy": "explicit"})
                                       for i in range(per_stream)))
            print(f"setup: {consumers} consumers in {streams} streams in {time.perf_counter() - began:.1f}s")
            store = Store(Path(tmp) / "bench.duckdb")
            store.migrate()
            collector = ConsumerListCollector(api, Scope("$G"), NameFilter(), lambda: "2026-11-22T00:00:00Z")
            full = []
            for _ in range(rounds):
                t = time.perf_counter()
                batch = await collector.collect()
                store.write(lambda con: writes.write_samples(con, ["$G"], batch.samples))
                full.append(time.perf_counter() - t)
                assert batch.consumers == consumers
            t = time.perf_counter()
            for s in range(streams):
                for i in range(per_stream):
                    await api.consumer_info(f"B{s}", f"c{i}")
            info = time.perf_counter() - t
            best = statistics.median(full)
            print(f"full sample (CONSUMER.LIST + parse + store), median of {rounds}: {best:.3f}s "
                  f"({consumers / best:,.0f} consumers/s)")
            print(f"baseline, one INFO per consumer (fetch only): {info:.3f}s")
            print(f"ratio: the full sample is {info / best:.1f}x cheaper than INFO per consumer")
            await nc.close()
        finally:
            server.stop()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--consumers", type=int, default=10_000)
    p.add_argument("--streams", type=int, default=100)
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    asyncio.run(main(a.consumers, a.streams, a.rounds))
