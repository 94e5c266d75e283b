"""Collector: a full sample of N consumers (discover, fetch, parse, store) with CONSUMER.LIST
paging, against the same work done with one CONSUMER.INFO request per consumer (discover the
names with CONSUMER.NAMES, fetch each, parse, store), both with the same number of requests in
flight (the collector's cap), against a real local nats-server."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import nats

from bench.machine import print_header
from jetwatch.collectors.consumer_list import ConsumerListCollector
from jetwatch.collectors.consumer_state import Scope
from jetwatch.collectors.filters import NameFilter
from jetwatch.core.embedded_server import NatsServer
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.store import writes
from jetwatch.store.database import Store

CONCURRENCY = 8  # requests in flight, for the collector and the baseline alike


async def main(consumers: int, streams: int, rounds: int) -> None:
    print_header()
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
            collector = ConsumerListCollector(api, Scope("$G"), NameFilter(), lambda: "2026-11-22T00:00:00Z",
                                              concurrency=CONCURRENCY)
            full = []
            for _ in range(rounds):
                t = time.perf_counter()
                batch = await collector.collect()
                store.write(lambda con: writes.write_samples(con, ["$G"], batch.samples, arrow=batch.arrow))
                full.append(time.perf_counter() - t)
                assert batch.consumers == consumers
            limit = asyncio.Semaphore(CONCURRENCY)

            async def info_each(stream: str) -> list[dict]:
                async with limit:
                    names = await api.consumer_names(stream)

                async def one(name: str) -> dict:
                    async with limit:
                        return await api.consumer_info(stream, name)
                return list(await asyncio.gather(*(one(n) for n in names)))

            per_info = []
            for _ in range(rounds):
                t = time.perf_counter()
                names = await api.stream_names()
                pages = await asyncio.gather(*(info_each(s) for s in names))
                batch = collector.batch_from_entries(list(zip(names, pages)))
                store.write(lambda con: writes.write_samples(con, ["$G"], batch.samples))
                per_info.append(time.perf_counter() - t)
                assert batch.consumers == consumers
            info = statistics.median(per_info)
            best = statistics.median(full)
            print(f"full sample (CONSUMER.LIST + parse + store), median of {rounds}: {best:.3f}s "
                  f"({consumers / best:,.0f} consumers/s)")
            print(f"baseline, the same sample with CONSUMER.NAMES + one INFO per consumer (same cap of {CONCURRENCY} "
                  f"in flight, same parse and store), median of {rounds}: {info:.3f}s")
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
