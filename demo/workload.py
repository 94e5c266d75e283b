"""The demo workload: streams, consumers of every priority policy, workers, scripted trouble.

Runs against any server (`python -m jetwatch.demo.workload --server URL`), but is meant for the embedded
one: it creates its streams and consumers, publishes at a steady rate, and on a loop makes the
things jetwatch is for happen: a pinned worker that stalls (a `timeout` unpin), an admin unpin,
a worker that dies and comes back, a backlog that builds and drains, a worker that never acks,
and a consumer nobody pulls from (demo/script.py says which consumer gets what, and what
jetwatch should say about it: the Fleet shows it beside the demo).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import signal
import sys
from typing import Any

import nats
from nats.aio.client import Client

from jetwatch.core.connection import connect_options
from jetwatch.core.jsapi import JetStreamAPI, JetStreamAPIError
from jetwatch.core.pin_announce import PinAnnouncer
from jetwatch.core.settings import resolve
from jetwatch.core.urls import strip_userinfo
from jetwatch.demo.workers import PullWorker

log = logging.getLogger("jetwatch.demo")

PIN_TIMEOUT_S = 5.0
DEMO_ACTOR = "demo-script"  # who the audit log says unpinned, for the script's operator unpins

STREAMS = [
    {"name": "ORDERS", "subjects": ["orders.>"], "max_age": 3600 * 10**9, "storage": "file"},
    {"name": "EVENTS", "subjects": ["events.>"], "max_age": 3600 * 10**9, "storage": "file"},
]
CONSUMERS: list[tuple[str, dict[str, Any]]] = [
    ("ORDERS", {"durable_name": "fulfilment", "ack_policy": "explicit", "priority_policy": "pinned_client",
                "priority_groups": ["jobs"], "priority_timeout": int(PIN_TIMEOUT_S * 1e9), "ack_wait": 10 * 10**9}),
    ("ORDERS", {"durable_name": "billing", "ack_policy": "explicit", "priority_policy": "overflow",
                "priority_groups": ["jobs"], "ack_wait": 10 * 10**9}),
    ("ORDERS", {"durable_name": "archive", "ack_policy": "explicit", "filter_subject": "orders.archived"}),
    ("EVENTS", {"durable_name": "audit-log", "ack_policy": "explicit", "priority_policy": "prioritized",
                "priority_groups": ["jobs"]}),
    ("EVENTS", {"durable_name": "analytics", "ack_policy": "explicit", "max_ack_pending": 200}),
    ("EVENTS", {"durable_name": "notify", "ack_policy": "explicit", "max_ack_pending": 20,
                "ack_wait": 4 * 10**9, "max_deliver": 5}),
]


async def ensure_topology(api: JetStreamAPI) -> None:
    for stream in STREAMS:
        try:
            await api.add_stream(stream)
        except JetStreamAPIError as exc:
            log.info("stream %s: %s", stream["name"], exc.description)
    for stream_name, config in CONSUMERS:
        try:
            await api.add_consumer(stream_name, config)
        except JetStreamAPIError as exc:
            log.info("consumer %s: %s", config["durable_name"], exc.description)


class Workload:
    def __init__(self, url: str, **auth: Any):
        self.url = url
        self.auth = auth  # user/password/token/creds, never part of the URL that is logged
        self.tasks: list[asyncio.Task[None]] = []
        self.workers: dict[str, PullWorker] = {}
        self.connections: list[Client] = []

    async def connect(self, name: str) -> Client:
        nc = await nats.connect(self.url, name=f"demo-{name}", **self.auth, max_reconnect_attempts=-1, reconnect_time_wait=1)
        self.connections.append(nc)
        return nc

    async def worker(self, key: str, stream: str, consumer: str, **kw: Any) -> PullWorker:
        nc = await self.connect(key)
        if kw.get("group"):  # a grouped worker says who holds each pin it is given, as a real one should
            kw["announcer"] = PinAnnouncer(nc, stream, consumer, kw["group"])
        w = PullWorker(nc, stream, consumer, name=key, **kw).start()
        self.workers[key] = w
        return w

    async def start(self) -> None:
        nc = await self.connect("admin")
        self.api = JetStreamAPI(nc)
        self.nc = nc
        await ensure_topology(self.api)
        for name in ("f1", "f2", "f3"):
            await self.worker(name, "ORDERS", "fulfilment", group="jobs", work_s=0.01)
        await self.worker("billing-main", "ORDERS", "billing", group="jobs", work_s=0.02)
        await self.worker("billing-overflow", "ORDERS", "billing", group="jobs", min_pending=50)
        await self.worker("audit-0", "EVENTS", "audit-log", group="jobs", priority=0)
        await self.worker("audit-1", "EVENTS", "audit-log", group="jobs", priority=1)
        await self.worker("analytics", "EVENTS", "analytics", work_s=0.08)
        notify = await self.worker("notify", "EVENTS", "notify")
        notify.acking = False  # a worker that never acks
        loop = asyncio.get_running_loop()
        self.tasks += [loop.create_task(c) for c in (self.publish(), self.trouble())]

    async def publish(self) -> None:
        n = 0
        while True:
            burst = 1 + (30 if (n // 200) % 3 == 2 else 0)  # every third stretch, a burst: backlog builds
            for _ in range(burst):
                await self.nc.publish("orders.new", f"order {n}".encode())
                await self.nc.publish("events.click", f"event {n}".encode())
                if n % 50 == 0:
                    await self.nc.publish("orders.archived", f"archived {n}".encode())  # nobody pulls these
                n += 1
            await asyncio.sleep(0.1)

    def pinned(self) -> PullWorker | None:
        for key in ("f1", "f2", "f3"):
            w = self.workers.get(key)
            if w and w.pin_id and not w.stalled:
                return w
        return None

    async def trouble(self) -> None:
        """The script: one kind of trouble after another, on a loop."""
        await asyncio.sleep(8)
        while True:
            w = self.pinned()
            if w:
                log.info("trouble: pinned worker %s stalls", w.name)
                w.stalled = True
                await asyncio.sleep(PIN_TIMEOUT_S + 4)
                w.stalled = False
            await asyncio.sleep(6)
            await self.operator_unpin()
            await asyncio.sleep(8)
            victim = random.choice(["f1", "f2", "f3"])
            log.info("trouble: worker %s dies", victim)
            old = self.workers.pop(victim)
            await old.stop()
            await old.nc.close()
            await asyncio.sleep(10)
            await self.worker(victim, "ORDERS", "fulfilment", group="jobs", work_s=0.01)
            log.info("trouble: worker %s is back", victim)
            await asyncio.sleep(8)

    async def operator_unpin(self) -> None:
        """The script's operator unpins ORDERS/fulfilment as an operator would, with `jetwatch unpin`:
        confirmed, sent and written to the audit log (its store from the environment `jetwatch up`
        gives), so the Audit page shows it beside the Pins page's admin unpin. Without a store to
        audit in (the workload run on its own), it unpins directly and says so."""
        log.info("trouble: an operator unpins ORDERS/fulfilment (jetwatch unpin, audited)")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "jetwatch.cli", "unpin", "ORDERS", "fulfilment", "--group", "jobs", "--yes",
            "--actor", DEMO_ACTOR, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await proc.communicate()
        if proc.returncode == 0:
            return
        log.warning("jetwatch unpin failed (%s): unpinning without an audit row",
                    out.decode(errors="replace").strip()[-300:])
        try:
            await self.api.unpin("ORDERS", "fulfilment", "jobs")
        except Exception as exc:
            log.warning("unpin failed: %s", exc)

    async def stop(self) -> None:
        for t in self.tasks:
            t.cancel()
        for w in self.workers.values():
            await w.stop()
        for nc in self.connections:
            if not nc.is_closed:
                await nc.close()


async def run(url: str, **auth: Any) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    workload = Workload(url, **auth)
    await workload.start()
    log.info("demo workload running against %s", strip_userinfo(url))
    await stop.wait()
    await workload.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description="jetwatch demo workload")
    parser.add_argument("--server", help="Server URL (default: the JETWATCH_SERVER setting; credentials "
                        "come from the connection settings in the environment, never from here).")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = resolve(None)
    if args.server:
        settings = settings.replace(server=args.server)
    options = connect_options(settings, "demo")
    auth = {k: options[k] for k in ("user", "password", "token", "nkeys_seed", "user_credentials", "tls")
            if k in options}
    asyncio.run(run(options["servers"][0], **auth))


if __name__ == "__main__":
    main()
