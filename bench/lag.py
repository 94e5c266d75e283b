"""Time lag: what reading ages adds to a sampling cycle, against a real local nats-server.

10,000 consumers in 100 streams; 20 streams hold messages, so their 2,000 consumers have a backlog,
each at its own position (deliver_policy by_start_sequence), so no two share a read. Between
rounds (untimed) every backlogged consumer takes and acknowledges one message: every floor moves,
the worst case for the cache. Each round then times, on the same state, a cycle without lag
(CONSUMER.LIST + parse + store) and a cycle with lag (the same plus collectors/lag.py's fill; which of the two runs first alternates), with
10% of the backlogged consumers taken as non-OK, read every cycle; the rest in turn). Prints the
medians, their ratio (target ≤ 1.25), reads per cycle, and how many ages were exact or estimated.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import nats

from bench.machine import print_header
from jetwatch.collectors.consumer_list import ConsumerListCollector
from jetwatch.collectors.consumer_state import Scope
from jetwatch.collectors.filters import NameFilter
from jetwatch.collectors.lag import LagReader
from jetwatch.core.embedded_server import NatsServer
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.store import writes
from jetwatch.store.database import Store


async def setup(nc: nats.NATS, api: JetStreamAPI, consumers: int, streams: int, busy: int,
                spacing: int) -> list[tuple[str, str]]:
    """Streams and consumers; the first `busy` streams get messages and their consumers start
    `spacing` sequences apart (more than the rounds: a floor that moved never lands where another
    consumer's was, so no read is shared or cached across consumers). Returns the backlogged
    (stream, consumer) pairs."""
    per_stream = consumers // streams
    messages = per_stream * spacing + spacing
    backlogged = []
    for s in range(streams):
        await api.add_stream({"name": f"L{s}", "subjects": [f"l{s}.>"], "storage": "memory", "allow_direct": True})
        if s < busy:
            await asyncio.gather(*(nc.request(f"l{s}.x", b"job", timeout=30) for _ in range(messages)))
        configs = [{"durable_name": f"c{i}", "ack_policy": "explicit", "ack_wait": int(600e9),
                    **({"deliver_policy": "by_start_sequence", "opt_start_seq": 1 + i * spacing} if s < busy else {})}
                   for i in range(per_stream)]
        await asyncio.gather(*(api.add_consumer(f"L{s}", c) for c in configs))
        if s < busy:
            backlogged += [(f"L{s}", f"c{i}") for i in range(per_stream)]
    return backlogged


async def advance(nc: nats.NATS, pairs: list[tuple[str, str]], limit: int = 64) -> None:
    """Each consumer takes one message and acknowledges it: its floor moves by one."""
    gate = asyncio.Semaphore(limit)

    async def one(stream: str, consumer: str) -> None:
        async with gate:  # a pull's reply keeps the message's own subject: an inbox of its own, not request()
            inbox = nc.new_inbox()
            sub = await nc.subscribe(inbox, max_msgs=1)
            await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}",
                             json.dumps({"batch": 1, "no_wait": True}).encode(), reply=inbox)
            msg = await sub.next_msg(timeout=10)
            if msg.reply and msg.reply.startswith("$JS.ACK"):
                await nc.publish(msg.reply, b"+ACK")

    await asyncio.gather(*(one(s, c) for s, c in pairs))
    await nc.flush()


async def main(consumers: int, streams: int, busy: int, rounds: int, urgent_share: float,
               verbose: bool = False) -> None:
    print_header()
    with tempfile.TemporaryDirectory() as tmp:
        server = NatsServer(store_dir=Path(tmp) / "js").start()
        try:
            nc = await nats.connect(server.url)
            api = JetStreamAPI(nc, timeout=30)
            began = time.perf_counter()
            backlogged = await setup(nc, api, consumers, streams, busy, spacing=rounds + 3)
            print(f"setup: {consumers} consumers in {streams} streams, {len(backlogged)} with a backlog, "
                  f"in {time.perf_counter() - began:.1f}s")
            store = Store(Path(tmp) / "bench.duckdb")
            store.migrate()
            sampler = ConsumerListCollector(api, Scope("$G"), NameFilter(), lambda: "2026-11-22T00:00:00Z")
            lag = LagReader(nc, "$G")
            urgent = {("$G", s, c) for s, c in backlogged[:: max(1, round(1 / urgent_share))]}

            parts: dict[str, list[float]] = {"collect": [], "collect+": [], "write": [], "write+": []}

            async def cycle(with_lag: bool) -> float:
                t = time.perf_counter()
                batch = await sampler.collect()
                t1 = time.perf_counter()
                if with_lag:
                    await lag.fill(batch, urgent)
                t2 = time.perf_counter()
                store.write(lambda con: writes.write_samples(con, ["$G"], batch.samples, arrow=batch.arrow))
                assert batch.consumers == consumers
                parts["collect+" if with_lag else "collect"].append(t1 - t)
                parts["write+" if with_lag else "write"].append(time.perf_counter() - t2)
                return time.perf_counter() - t

            await cycle(False)  # warm both paths up once (first page reads, the store's first write)
            first_lag = await cycle(True)
            cold = lag.last
            plain, lagged, reads, exact, estimated, fill = [], [], [], [], [], []
            for r in range(rounds):
                await advance(nc, backlogged)
                # Alternate which cycle comes first after the floors moved (the first one meets a
                # server still settling the acks): neither side gets the quieter slot every time.
                if r % 2 == 0:
                    plain.append(await cycle(False))
                    lagged.append(await cycle(True))
                else:
                    lagged.append(await cycle(True))
                    plain.append(await cycle(False))
                reads.append(lag.last.requests)
                exact.append(lag.last.exact)
                estimated.append(lag.last.estimated)
                fill.append(lag.last.seconds)
            without, with_ = statistics.median(plain), statistics.median(lagged)
            print(f"first cycle with lag (cold cache): {first_lag:.3f}s, {cold.requests} reads, "
                  f"{cold.exact} exact / {cold.estimated} estimated ages")
            print(f"cycle without lag, median of {rounds}: {without:.3f}s")
            print(f"cycle with lag, median of {rounds}: {with_:.3f}s (lag fill {statistics.median(fill):.3f}s)")
            print(f"ratio: {with_ / without:.3f} (target <= 1.25), +{(with_ / without - 1) * 100:.0f}%; "
                  f"lag fill alone over the cycle without lag: +{statistics.median(fill) / without * 100:.0f}%")
            if verbose:
                print("without:", " ".join(f"{x:.3f}" for x in plain))
                print("with:   ", " ".join(f"{x:.3f}" for x in lagged))
                print("fill:   ", " ".join(f"{x:.3f}" for x in fill))
            m = {k: statistics.median(v[-rounds:]) for k, v in parts.items()}
            print(f"parts (medians): list+parse {m['collect']:.3f}s / {m['collect+']:.3f}s, store write "
                  f"{m['write']:.3f}s / {m['write+']:.3f}s (without / with lag)")
            print(f"reads per cycle (every floor moved; {len(urgent)} non-OK read each cycle, the rest in turn "
                  f"of {lag.rotation}): median {statistics.median(reads):.0f}, min {min(reads)}, max {max(reads)}")
            print(f"ages per cycle: exact median {statistics.median(exact):.0f}, "
                  f"estimated median {statistics.median(estimated):.0f}")
            await nc.close()
        finally:
            server.stop()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--consumers", type=int, default=10_000)
    p.add_argument("--streams", type=int, default=100)
    p.add_argument("--busy-streams", type=int, default=20, help="streams whose consumers have a backlog")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--urgent-share", type=float, default=0.1, help="share of backlogged consumers taken as non-OK")
    p.add_argument("--verbose", action="store_true", help="print every round's figures")
    a = p.parse_args()
    asyncio.run(main(a.consumers, a.streams, a.busy_streams, a.rounds, a.urgent_share, a.verbose))
