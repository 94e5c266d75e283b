"""`jetwatch collect`: sample consumer state on an interval, capture advisories continuously.

Two loops share one NATS connection and one writer thread: the sampling loop (every
`interval`) and the advisory loop (flushes within about half a second). Store writes go through a
single-thread executor, so the async loops never block on DuckDB and never write concurrently.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

from nats.aio.client import Client

from jetwatch.collectors.alerting import AlertmanagerClient
from jetwatch.collectors.advisories import (
    Capture, CoreCapture, DurableCapture, MalformedAdvisory, ensure_capture_stream, parse_advisory,
)
from jetwatch.collectors.consumer_list import ConsumerListCollector
from jetwatch.collectors.consumer_state import Scope
from jetwatch.collectors.filters import NameFilter
from jetwatch.collectors.judging import JudgedCycle, judge_stored_cycle
from jetwatch.collectors.jsz import HttpJsz, JszCollector, SystemJsz
from jetwatch.collectors.metrics import CycleHistogram, MetricsExporter, PinCounts, Snapshot
from jetwatch.core.clock import rfc3339, utcnow
from jetwatch.core.jsapi import JetStreamAPI, JetStreamAPIError, NoReply
from jetwatch.core.settings import Settings
from jetwatch.health.rules import Thresholds
from jetwatch.store import writes
from jetwatch.store.database import Store, StoreError

log = logging.getLogger("jetwatch.collector")
T = TypeVar("T")


async def account_scope(nc: Client) -> Scope:
    """Which account and server this connection sees, from the server itself."""
    account = "$G"
    try:
        reply = json.loads((await nc.request("$SYS.REQ.USER.INFO", b"", timeout=2)).data)
        account = reply.get("data", {}).get("account") or account
    except Exception as exc:  # old servers and restricted users: fall back to the default
        log.info("could not read the account name (%s); using %s", exc, account)
    domain = None
    try:
        domain = json.loads((await nc.request("$JS.API.INFO", b"", timeout=2)).data).get("domain")
    except Exception:
        pass
    return Scope(account=account, server=(nc._server_info or {}).get("server_name"), domain=domain)


class Collector:
    def __init__(self, settings: Settings, nc: Client, store: Store,
                 clock: Callable[[], dt.datetime] = utcnow, system_nc: Client | None = None):
        self.settings = settings
        self.nc = nc
        self.system_nc = system_nc  # a system-account connection: sample through PING.JSZ
        self.store = store
        self.clock = clock
        self.api = JetStreamAPI(nc, timeout=settings.request_timeout)
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jetwatch-writer")
        self.capture: Capture | None = None
        self.caught_up = False
        self.capture_pending: int | None = None
        self.last_event_at: dt.datetime | None = None
        self.last_error: tuple[str, dt.datetime] | None = None
        self.started_at = clock()
        self.name_filter = self._make_filter()
        self.cycles = 0
        self.thresholds = Thresholds.from_settings(settings)
        self.rejects_total = 0
        self.cycle_hooks: list[Callable[[Collector, JudgedCycle, float], Any]] = []
        self.pin_counts = PinCounts()
        self.durations = CycleHistogram()
        self.metrics: MetricsExporter | None = None
        self.metrics_bound: tuple[str, int] | None = None
        self.alertmanager: AlertmanagerClient | None = None
        self._alerts_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jetwatch-alerts")
        self._alert_post: asyncio.Future[None] | None = None
        self._rendering: asyncio.Future[bytes] | None = None
        self._render = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jetwatch-render")
        self.judged: JudgedCycle | None = None  # the latest cycle's verdicts

    async def write(self, fn: Callable[[Any], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._writer, self.store.write, fn)

    def _make_filter(self) -> NameFilter:
        s = self.settings
        return NameFilter(s.include_streams, s.exclude_streams, s.include_consumers,
                          s.exclude_consumers, s.show_internal, s.capture_stream)

    async def start(self) -> None:
        self.scope = await account_scope(self.nc)
        known = await self.write(writes.latest_config_hashes)
        self.store_id = await self.write(writes.store_id)
        def stamp() -> str:
            return rfc3339(self.clock())

        if self.system_nc is not None:
            self.sampler: Any = JszCollector(SystemJsz(self.system_nc, self.settings.request_timeout),
                                             self.name_filter, stamp)
        elif self.settings.monitor_url:
            self.sampler = JszCollector(HttpJsz(self.settings.monitor_url, self.settings.request_timeout),
                                        self.name_filter, stamp)
        else:
            self.sampler = ConsumerListCollector(self.api, self.scope, self.name_filter, stamp)
        self.sampler.known_hashes = known
        if self.settings.metrics_address:
            self.metrics = MetricsExporter(self.settings.metrics_cardinality)
            self.metrics_bound = self.metrics.serve(self.settings.metrics_address)
            self.cycle_hooks.append(Collector._export_metrics)
        if self.settings.alertmanager:
            self.alertmanager = AlertmanagerClient(self.settings.alertmanager, self.settings.alert_after,
                                                   self.settings.dashboard_url, self.settings.interval)
            self.cycle_hooks.append(Collector._send_alerts)
        self.capture = await self._open_capture()

    async def _open_capture(self) -> Capture:
        s = self.settings
        if await ensure_capture_stream(self.api, s.capture_stream, s.capture_max_age, s.capture_max_bytes):
            durable = DurableCapture(self.nc, self.api, s.capture_stream, f"jetwatch-{self.store_id[:16]}",
                                     forget_after_s=s.capture_max_age)
            try:
                await durable.open()
                log.info("capturing advisories durably through stream %s", s.capture_stream)
                return durable
            except (JetStreamAPIError, NoReply) as exc:
                log.warning("cannot read capture stream %s: %s", s.capture_stream, exc)
        log.warning(
            "advisories are captured with a plain subscription: pin events that happen while the "
            "collector is down will be missed. Run `jetwatch setup` with JetStream admin rights "
            "to create the capture stream %s.", s.capture_stream)
        core = CoreCapture(self.nc)
        await core.open()
        self.caught_up = True
        return core

    def _error(self, message: str) -> None:
        log.error("%s", message)
        self.last_error = (message, self.clock())

    async def sample_once(self) -> int:
        """One sampling cycle; returns the number of consumers stored."""
        began = time.monotonic()
        batch = await self.sampler.collect()
        now = self.clock()
        if self.capture is not None:
            try:
                self.capture_pending = await self.capture.backlog()
            except (JetStreamAPIError, NoReply):
                self.capture_pending = None
            self.caught_up = self.capture_pending == 0
        accounts = sorted(batch.accounts)
        caught_up = self.caught_up
        status = self._status(now, time.monotonic() - began, batch.streams, batch.consumers)
        thresholds = self.thresholds

        def tx(con: Any) -> None:
            writes.write_samples(con, accounts, batch.samples)
            writes.write_configs(con, batch.configs)
            writes.write_rejects(con, now, "consumer_state", batch.rejects)
            if caught_up:
                writes.reconcile_pins(con, now, self.settings.inference_grace)
            writes.write_status(con, status)

        await self.write(tx)
        # On the writer thread, so no other write slips between the samples and their verdicts.
        judged = await asyncio.get_running_loop().run_in_executor(
            self._writer, judge_stored_cycle, self.store, now, thresholds)
        self.judged = judged
        self.rejects_total += len(batch.rejects)
        self.cycles += 1
        self.durations.observe(time.monotonic() - began)
        await self._after_cycle(self.judged, time.monotonic() - began)
        return batch.consumers

    def snapshot(self, judged: JudgedCycle) -> Snapshot:
        """The cycle as the exporters see it (copies: rendering runs on another thread)."""
        return Snapshot(at=judged.at, consumers=judged.consumers,
                        pins=PinCounts(self.pin_counts.switches.copy(), self.pin_counts.unpins.copy()),
                        cycle_buckets=list(self.durations.counts), cycle_sum=self.durations.total,
                        cycles=self.cycles, capture_backlog=self.capture_pending, rejects=self.rejects_total)

    async def _export_metrics(self, judged: JudgedCycle, seconds: float) -> None:
        """Render /metrics once per cycle, on a worker thread, without holding up the next cycle
        (a full-cardinality render of a large fleet takes a while); a render still under way
        when the next cycle ends is not queued behind: that cycle is skipped, the one after rendered."""
        assert self.metrics is not None
        if self._rendering is not None and not self._rendering.done():
            return
        self._rendering = asyncio.get_running_loop().run_in_executor(
            self._render, self.metrics.render, self.snapshot(judged))
        self._rendering.add_done_callback(self._rendered)

    def _rendered(self, done: "asyncio.Future[bytes]") -> None:
        if not done.cancelled() and done.exception() is not None:
            self._error(f"rendering /metrics failed: {type(done.exception()).__name__}: {done.exception()}")

    async def _send_alerts(self, judged: JudgedCycle, seconds: float) -> None:
        """Firing alerts (every cycle) and resolved ones to Alertmanager, off the event loop and
        without waiting: an Alertmanager that is slow or down never delays sampling. While a post
        is still under way the next one is skipped (firing alerts go again next cycle; resolved
        ones wait in the client until delivered)."""
        assert self.alertmanager is not None
        alerts = self.alertmanager.alerts_for(judged.consumers, judged.changes, judged.at)
        if self._alert_post is not None and not self._alert_post.done():
            log.warning("the previous post to Alertmanager is still under way; sending next cycle")
            return
        self._alert_post = asyncio.get_running_loop().run_in_executor(self._alerts_pool, self.alertmanager.post, alerts)
        self._alert_post.add_done_callback(self._alert_posted)

    def _alert_posted(self, done: "asyncio.Future[None]") -> None:
        if not done.cancelled() and done.exception() is not None:
            self._error(f"alerting failed: {done.exception()}")

    async def _after_cycle(self, judged: JudgedCycle, seconds: float) -> None:
        """Hand the cycle's verdicts to the exporters (metrics, alerts), if any are on."""
        for hook in self.cycle_hooks:
            try:
                await hook(self, judged, seconds)
            except Exception as exc:  # an exporter never costs a cycle
                log.exception("exporting the cycle failed")
                self._error(f"exporting the cycle failed: {type(exc).__name__}: {exc}")

    @property
    def sample_mode(self) -> str:
        return "system_jsz" if self.system_nc is not None else "jsz" if self.settings.monitor_url else "consumer_list"

    def _status(self, now: dt.datetime, seconds: float, streams: int, consumers: int) -> dict[str, Any]:
        return {
            "collector": self.name, "started_at": self.started_at, "last_cycle_at": now,
            "cycle_seconds": seconds, "streams": streams, "consumers": consumers,
            "sample_mode": self.sample_mode,
            "capture_mode": self.capture.mode if self.capture else None,
            "capture_pending": self.capture_pending, "capture_caught_up": self.caught_up,
            "last_event_at": self.last_event_at,
            "last_error": self.last_error[0] if self.last_error else None,
            "last_error_at": self.last_error[1] if self.last_error else None,
            "server_url": self.nc.connected_url.geturl() if self.nc.connected_url else None,
        }

    async def events_once(self) -> int:
        """Fetch, store, then acknowledge one batch of advisories; returns how many were read."""
        assert self.capture is not None
        fetched = await self.capture.fetch()
        if not fetched.messages:
            return 0
        now = self.clock()
        rows, rejects = [], []
        for subject, data in fetched.messages:
            try:
                row = parse_advisory(subject, data, self.scope.account, rfc3339(now))
            except MalformedAdvisory as exc:
                rejects.append((subject, str(exc), data.decode("utf-8", "replace")[:10000]))
                continue
            if self._watched(row):
                rows.append(row)

        def tx(con: Any) -> None:
            writes.write_advisories(con, rows)
            writes.write_rejects(con, now, "advisory", rejects)

        await self.write(tx)
        await self.capture.ack(fetched)  # only now: the rows are committed
        self.pin_counts.add(rows)
        self.rejects_total += len(rejects)
        self.last_event_at = now
        return len(fetched.messages)

    def _watched(self, row: dict[str, Any]) -> bool:
        f = self.name_filter
        return (row["stream"] is None or f.stream_ok(row["stream"])) and (
            row["consumer"] is None or f.consumer_ok(row["consumer"]))

    async def _sample_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            began = time.monotonic()
            try:
                await self.sample_once()
            except (NoReply, JetStreamAPIError, StoreError, OSError) as exc:
                self._error(f"sampling failed: {exc}")
            except Exception as exc:  # keep collecting whatever one cycle trips over
                log.exception("sampling cycle failed")
                self._error(f"sampling failed: {type(exc).__name__}: {exc}")
            wait = max(0.0, self.settings.interval - (time.monotonic() - began))
            try:
                await asyncio.wait_for(stop.wait(), wait)
            except asyncio.TimeoutError:
                pass

    async def _event_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.events_once()
            except StoreError as exc:
                self._error(f"storing advisories failed (they stay in the capture stream): {exc}")
            except Exception as exc:
                if self.nc.is_closed:
                    return
                log.warning("advisory fetch failed: %s", exc)
                try:
                    await asyncio.wait_for(stop.wait(), 0.5)
                except asyncio.TimeoutError:
                    pass

    async def run(self, stop: asyncio.Event) -> None:
        try:
            await self.start()
            await asyncio.gather(self._sample_loop(stop), self._event_loop(stop))
            # Last flush: whatever arrived before the stop is stored and acknowledged.
            for _ in range(10):
                if not await self.events_once():
                    break
        finally:
            if self.capture is not None:
                await self.capture.close()
            self._writer.shutdown(wait=True)
            self._render.shutdown(wait=True)
            self._alerts_pool.shutdown(wait=True)  # a post under way finishes (bounded by its timeout)
            if self.metrics is not None:
                self.metrics.close()
