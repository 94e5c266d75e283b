"""Scale: one collector against N consumers (default 100,000) on a real local nats-server, per
cycle: fetch (CONSUMER.LIST paging, the collector's cap in flight), parse, store (the collector's
write transaction), judge (window features from the in-memory window, the rules, the verdicts
kept), and the total; the collector's CPU share at a 10 s interval; the process's peak RSS.

Consumers are spread over streams (memory storage); every tenth stream is a pinned_client
priority group and every fifth stream holds messages, so its consumers have a backlog. The
baseline in the same run is the fetch alone done one stream at a time (sequential paging): the
floor of what any collector must spend to see every consumer once. Between cycles, as the
collector does, a sealing pass when one is due (store/sealing.py), timed apart from the cycles.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import resource
import statistics
import tempfile
import time
from pathlib import Path

import nats

from bench.machine import print_header
from jetwatch.collectors.consumer_list import ConsumerListCollector
from jetwatch.collectors.consumer_state import SampleBatch, Scope, add_consumer
from jetwatch.collectors.filters import NameFilter
from jetwatch.collectors.gc_policy import GcPolicy
from jetwatch.collectors.judging import JudgedCycle, event_counts, judge, keep, load_window
from jetwatch.core.clock import utcnow
from jetwatch.core.embedded_server import NatsServer
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.health.rules import Thresholds
from jetwatch.store import writes
from jetwatch.store.database import Store
from jetwatch.store.sealing import seal_pass

INTERVAL = 10.0  # the collector's default interval: the CPU share is the cycle's CPU over it
CONCURRENCY = 8  # the collector's cap of requests in flight


async def setup(nc: nats.NATS, api: JetStreamAPI, consumers: int, streams: int) -> None:
    per_stream = consumers // streams
    gate = asyncio.Semaphore(256)

    async def add(stream: str, config: dict) -> None:
        async with gate:
            await api.add_consumer(stream, config)

    for s in range(streams):
        await api.add_stream({"name": f"X{s}", "subjects": [f"x{s}.>"], "storage": "memory"})
        if s % 5 == 0:
            await asyncio.gather(*(nc.request(f"x{s}.job", b"job", timeout=30) for _ in range(20)))
        grouped = {"priority_policy": "pinned_client", "priority_groups": ["jobs"], "priority_timeout": int(60e9)} \
            if s % 10 == 0 else {}
        await asyncio.gather(*(add(f"X{s}", {"durable_name": f"c{i}", "ack_policy": "explicit", **grouped})
                               for i in range(per_stream)))


def one_by_one(pages: list, scope: Scope, known: dict) -> SampleBatch:
    """The entry-by-entry parse (validate, hash every config) of the same pages."""
    batch = SampleBatch(accounts={scope.account})
    now = utcnow().isoformat()
    for _, consumers in pages:
        for info in consumers:
            add_consumer(batch, info, scope, now, known)
    return batch


def decoded(pages: list) -> list:
    """Each stream's pages decoded as JetStreamAPI.consumer_list decodes them (the collector's
    fetch did, before it kept the pages as sent)."""
    return [(stream, got if not isinstance(got, list) else
             [info for raw in got for info in json.loads(raw).get("consumers") or []]) for stream, got in pages]


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def main(consumers: int, streams: int, cycles: int, interval: float, seal_every: float) -> None:
    print_header()
    th = Thresholds()
    policy = GcPolicy()
    with tempfile.TemporaryDirectory() as tmp:
        server = NatsServer(store_dir=Path(tmp) / "js").start(timeout=60)
        try:
            nc = await nats.connect(server.url)
            api = JetStreamAPI(nc, timeout=60)
            t = time.perf_counter()
            await setup(nc, api, consumers, streams)
            print(f"setup: {consumers:,} consumers in {streams:,} streams in {time.perf_counter() - t:.0f}s; "
                  f"peak RSS after setup {peak_rss_mib():,.0f} MiB")
            store = Store(Path(tmp) / "scale.duckdb", lock_timeout=60, query_timeout=600)
            store.migrate()
            sampler = ConsumerListCollector(api, Scope("$G"), NameFilter(), lambda: utcnow().isoformat(),
                                            concurrency=CONCURRENCY)
            window = load_window(store, utcnow(), th)
            parts: dict[str, list[float]] = {k: [] for k in ("fetch", "parse", "store", "judge", "total", "cpu")}
            judged_cycles: list[bool] = []
            seals: list[tuple[int, float]] = []
            seal_at = 0.0
            policy.apply()  # the collector's policy (collectors/gc_policy.py), as Collector.run applies it
            for _ in range(cycles):
                cpu0, t0 = time.process_time(), time.perf_counter()
                names = await api.stream_names()
                pages = await sampler.fetch(names)
                t1 = time.perf_counter()
                batch = sampler.batch_from_pages(pages)
                t2 = time.perf_counter()
                now = utcnow()
                status = {"collector": "bench", "started_at": now, "last_cycle_at": now, "cycle_seconds": t2 - t0,
                          "streams": batch.streams, "consumers": batch.consumers, "sample_mode": "consumer_list",
                          "capture_mode": None, "capture_pending": None, "capture_caught_up": None,
                          "last_event_at": None, "last_error": None, "last_error_at": None,
                          "server_url": server.url, "clock_offset_seconds": None, "capture_warning": None}
                spent: dict[str, float] = {}

                def tx(con) -> JudgedCycle:
                    """The runner's store_cycle transaction: the samples, configs and status
                    written, the cycle into the state, judged and kept, one COMMIT."""
                    a = time.perf_counter()
                    writes.write_samples(con, ["$G"], batch.samples, (), now, batch.arrow)
                    writes.write_configs(con, batch.configs)
                    writes.write_status(con, status)
                    b = time.perf_counter()
                    window.add(batch.samples, ["$G"], (), batch.configs)
                    judged = judge(window, now, th, event_counts(con, now, th))
                    keep(con, judged)
                    spent["judge"] = time.perf_counter() - b
                    spent["written"] = b - a
                    return judged

                judged = store.write(tx)
                judged.commit()
                t3 = time.perf_counter()
                assert batch.consumers == consumers and len(judged.consumers) == consumers, \
                    (batch.consumers, len(judged.consumers), batch.errors[:3])
                # store: the writes, the file's open, COMMIT and close; judge: the state, rules and verdicts kept
                for k, v in (("fetch", t1 - t0), ("parse", t2 - t1), ("store", t3 - t2 - spent["judge"]),
                             ("judge", spent["judge"]), ("total", t3 - t0), ("cpu", time.process_time() - cpu0)):
                    parts[k].append(v)
                judged_cycles.append(bool((judged.consumers["verdict"] != "COLLECTING").any()))
                if len(judged_cycles) < cycles:  # as the runner: a cycle's pages and batch are gone after it
                    del pages, batch
                if time.monotonic() >= seal_at:  # as the runner: a sealing pass between cycles when one is due
                    t4 = time.perf_counter()
                    sealed = seal_pass(store, dt.timedelta(seconds=seal_every))
                    seal_at = time.monotonic() + sealed.next_in.total_seconds()
                    if sealed.rows:
                        seals.append((sealed.rows, time.perf_counter() - t4))
                policy.between_cycles()  # as the runner: between cycles, outside the cycle's time
                await asyncio.sleep(max(0.0, interval - (time.perf_counter() - t0)))
            policy.restore()
            t = time.perf_counter()
            for s in await api.stream_names():
                await api.consumer_list_pages(s)  # what the collector's fetch does, one request at a time
            floor = time.perf_counter() - t
            # Same run, the last cycle's pages parsed again: read into Arrow (the collector's path);
            # decoded with json.loads and taken page at a time (the path before, and the one it falls
            # back to), its fingerprints warmed by a first pass as the collector's would be; entry by entry.
            t = time.perf_counter()
            fast = sampler.batch_from_pages(pages)
            fast_s = time.perf_counter() - t
            before = ConsumerListCollector(api, sampler.scope, NameFilter(), sampler.clock)
            before.known_hashes = dict(sampler.known_hashes)
            before.batch_from_entries(decoded(pages))
            t = time.perf_counter()
            entries = decoded(pages)
            decode_s = time.perf_counter() - t
            paged = before.batch_from_entries(entries)
            paged_s = time.perf_counter() - t - decode_s
            t = time.perf_counter()
            slow = one_by_one(entries, sampler.scope, dict(sampler.known_hashes))
            slow_s = time.perf_counter() - t
            assert fast.samples == paged.samples == slow.samples and fast.configs == paged.configs == slow.configs == []
            same_rows = writes.samples_table(fast.samples, fast.arrow).equals(writes.samples_table(paged.samples))
            steady = [i for i, j in enumerate(judged_cycles) if j] or list(range(1, cycles))
            first = {k: v[0] for k, v in parts.items()}
            med = {k: statistics.median(v[i] for i in steady) for k, v in parts.items()}
            print(f"first cycle (cold: a new store, every config new): fetch {first['fetch']:.2f}s, parse "
                  f"{first['parse']:.2f}s, store {first['store']:.2f}s, judge {first['judge']:.2f}s, "
                  f"total {first['total']:.2f}s")
            print(f"per cycle, median of the {len(steady)} cycles judged with verdicts (cycles {interval:g}s apart; "
                  f"the earlier ones are COLLECTING until the window spans {th.health_min_span:g}s): "
                  f"fetch {med['fetch']:.2f}s, parse {med['parse']:.2f}s, store {med['store']:.2f}s, "
                  f"judge {med['judge']:.2f}s, total {med['total']:.2f}s (max {max(parts['total'][i] for i in steady):.2f}s)")
            print(f"collector CPU per cycle {med['cpu']:.2f}s: {med['cpu'] / INTERVAL:.0%} of one core at a "
                  f"{INTERVAL:g}s interval; peak RSS {peak_rss_mib():,.0f} MiB; full collections between cycles: "
                  f"{policy.full_collections}, {policy.full_seconds:.2f}s in all")
            print(f"verdicts: {judged.consumers['verdict'].value_counts().to_dict()}")
            print("sealing passes between cycles (--seal-every " f"{seal_every:g}s): " + (", ".join(
                f"{n:,} samples in {d:.2f}s ({n / d:,.0f} rows/s)" for n, d in seals) or "none due"))
            print(f"baseline, fetching every consumer once with sequential CONSUMER.LIST paging (no parse, store "
                  f"or judge): {floor:.2f}s")
            print(f"ratio: the whole cycle costs {med['total'] / floor:.2f}x the sequential fetch alone")
            print(f"parse, same pages, configs unchanged: read into Arrow {fast_s:.2f}s (the collector's path); "
                  f"decoded with json.loads {decode_s:.2f}s + page at a time {paged_s:.2f}s = {decode_s + paged_s:.2f}s "
                  f"(the path before; its decode was part of the fetch): {(decode_s + paged_s) / fast_s:.1f}x; decoded + "
                  f"entry by entry {decode_s + slow_s:.2f}s. Same samples: True; the same table for the store: {same_rows}")
            print(f"targets: cycle <= 5 s median: {'met' if med['total'] <= 5 else 'NOT met'}; "
                  f"peak RSS <= 1.5 GB: {'met' if peak_rss_mib() <= 1536 else 'NOT met'}")
            await nc.close()
        finally:
            server.stop()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--consumers", type=int, default=100_000)
    p.add_argument("--streams", type=int, default=1_000)
    p.add_argument("--cycles", type=int, default=12)
    p.add_argument("--interval", type=float, default=INTERVAL)
    p.add_argument("--seal-every", type=float, default=120.0, help="the collector's --seal-every, seconds")
    a = p.parse_args()
    asyncio.run(main(a.consumers, a.streams, a.cycles, a.interval, a.seal_every))
