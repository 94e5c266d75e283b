"""`jetwatch collect`: sample consumer state on an interval, capture advisories continuously.

Two loops share one NATS connection and one writer thread: the sampling loop (every
`interval`) and the advisory loop (flushes within about half a second). Store writes go through a
single-thread executor, so the async loops never block on DuckDB and never write concurrently.
The sampling loop does not wait for its writes either: a cycle goes into the write backlog and a
task of its own writes what waits there, so a file held by another process never delays a sample.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import json
import logging
import os
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import duckdb
import pandas as pd
from nats.aio.client import Client

from jetwatch import sql
from jetwatch.collectors.advisories import (
    ADVISORY_PREFIX,
    Capture,
    CoreCapture,
    DurableCapture,
    MalformedAdvisory,
    open_capture_stream,
    parse_advisory,
)
from jetwatch.collectors.backlog import PendingCycle, WriteBacklog
from jetwatch.collectors.capture_gaps import DROPPED, DURABLE_GONE, Cursor, GapTracker, awaiting_json, awaiting_of
from jetwatch.collectors.cluster_watch import CycleSchedule, say_shown
from jetwatch.collectors.consumer_list import ConsumerListCollector, unavailable
from jetwatch.collectors.consumer_state import SampleBatch, Scope
from jetwatch.collectors.dropped import DroppedReader, drops_in
from jetwatch.collectors.error_state import ErrorState
from jetwatch.collectors.filters import NameFilter
from jetwatch.collectors.gc_policy import GcPolicy
from jetwatch.collectors.holder_connections import HolderConnections
from jetwatch.collectors.jsz import HttpJsz, JszCollector, SystemJsz
from jetwatch.collectors.judging import JudgedCycle, PullsAnnounced, event_counts, judge, keep, load_window
from jetwatch.collectors.lag import LagReader, LagStats
from jetwatch.collectors.live_state import LiveState
from jetwatch.collectors.pin_holders import HttpConnz, PinHolderCapture, SystemConnz, remembered_holders
from jetwatch.collectors.pull_settings import CURRENT_FOR, PullSettingsCapture, recent_settings
from jetwatch.collectors.quorum_watch import QuorumWatch
from jetwatch.collectors.rejects import RejectBudget
from jetwatch.collectors.unpin_requests import UnpinRequestCapture
from jetwatch.core.advisory_row import AdvisoryRow
from jetwatch.core.clock import rfc3339, utcnow
from jetwatch.core.connection import AccountUnknown, connected_account
from jetwatch.core.jsapi import ConsumerNotFound, JetStreamAPI, JetStreamAPIError, NoReply, StreamNotFound
from jetwatch.core.settings import Settings
from jetwatch.core.urls import strip_userinfo
from jetwatch.exporters.alertmanager import AlertmanagerClient
from jetwatch.exporters.cycle_outputs import CycleOutputs
from jetwatch.exporters.cycle_snapshot import CycleHistogram, DropCounts, MoveCounts, PinCounts, Snapshot
from jetwatch.exporters.metrics_server import MetricsExporter
from jetwatch.exporters.probes import Probes
from jetwatch.health import pin_causes, silences
from jetwatch.health.rules import Thresholds
from jetwatch.health.window_pass import compile_now
from jetwatch.store import clusters, writes
from jetwatch.store.database import Store, StoreError, StoreTooNew
from jetwatch.store.retention import Cutoffs, prune
from jetwatch.store.sealing import Sealed, seal_pass

log = logging.getLogger("jetwatch.collector")
# Errors of the file, the disk, a lock or the process, not of any one message: a batch of advisories
# that meets one stays unacknowledged and is tried again whole. Any other error is one message's (a
# value the checks did not foresee, whatever it raises): the batch is stored one by one, and what
# still fails goes to `rejects` alone, so no message can hold capture up.
UNAVAILABLE = (StoreError, OSError, MemoryError, duckdb.IOException, duckdb.FatalException)
T = TypeVar("T")


async def account_scope(nc: Client) -> Scope:
    """Which account and server this connection sees, from the server itself (AccountUnknown when
    the server does not say which account)."""
    account = await connected_account(nc)
    domain = None
    try:
        domain = json.loads((await nc.request("$JS.API.INFO", b"", timeout=2)).data).get("domain")
    except Exception:
        pass
    return Scope(account=account, server=(nc._server_info or {}).get("server_name"), domain=domain)


class Collector:
    def __init__(self, settings: Settings, nc: Client, store: Store,
                 clock: Callable[[], dt.datetime] = utcnow, system_nc: Client | None = None,
                 probes: Probes | None = None, metrics: MetricsExporter | None = None):
        self.settings = settings
        # What /healthz and /readyz read; the /metrics server, when it was started before connecting.
        self.probes = probes if probes is not None else Probes(settings.interval, settings.request_timeout, settings.lock_timeout)
        self._beats = probes is None  # probes of its own: this run marks its loop as turning itself
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
        self._backlog: asyncio.Task[int | None] | None = None  # the cycle's capture backlog query, under way
        self.last_event_at: dt.datetime | None = None
        self.errors = ErrorState(lambda: self.clock())  # the error the status shows, until a clean cycle is stored
        self._last_status: dict[str, Any] | None = None  # the latest cycle that was stored
        self.gaps: GapTracker | None = None  # where the store is in the capture stream
        self.capture_gaps_total = 0
        self.last_capture_gap_at: dt.datetime | None = None
        self._jump_reason = DROPPED  # what a jump in the capture stream's sequence means now
        self.capture_warning: str | None = None
        self.clock_offset: float | None = None  # server clock minus ours, seconds
        self.started_at = clock()
        self._learned: Scope | None = None  # the account and server, once the server said which account
        self.name_filter = self._make_filter()
        self.cycles = 0
        self.thresholds = Thresholds.from_settings(settings)
        self.window: LiveState | None = None  # what judging needs, kept between cycles
        # Consumers no longer listed that nothing said were removed (since when), and those a DELETED
        # advisory or an operator said were: shared by every live state this collector judges with.
        self.unlisted: dict[tuple[str, str, str], float] = {}
        self.removed: set[tuple[str, str, str]] = set()
        self.rejects_total = 0
        self.reject_budget = RejectBudget()
        self.cycle_hooks: list[Callable[[Collector, JudgedCycle, float], Any]] = []
        self.pin_counts = PinCounts()
        self.drop_counts = DropCounts()
        self.move_counts = MoveCounts()  # pin switches by cause, once settled
        self.durations = CycleHistogram()
        self.schedule = CycleSchedule(settings.interval)  # when the next cycle starts
        self.outputs = CycleOutputs(self.errors.report, metrics)  # /metrics and Alertmanager, each cycle, if on
        self.judged: JudgedCycle | None = None  # the latest cycle's verdicts
        self.backlog = WriteBacklog(settings.write_backlog)  # cycles the store could not take yet
        self.seen: set[tuple[str, str, str]] = set()  # consumers of the latest stored cycle
        self.retained: dict[str, int] = {}  # rows the latest retention pass deleted, per query
        self.lag: LagReader | None = None  # time lag of the connection's account (collectors/lag.py)
        self._lag_refused: set[str] = set()  # streams whose message reads were refused (said once)
        self.gc = GcPolicy()  # full collections between cycles, not inside them
        self.sealed: Sealed | None = None  # the latest sealing pass
        self._seal_at = 0.0  # monotonic time of the next sealing pass
        self.fatal: StoreTooNew | None = None  # why the run stopped itself
        self._stop: asyncio.Event | None = None
        self._writing = asyncio.Lock()  # one write of cycles at a time (write_queued)
        self.pin_holders: PinHolderCapture | None = None  # who holds each pin, as announced
        self.pull_settings: PullSettingsCapture | None = None  # what the workers pull with, as announced
        self.holders: HolderConnections | None = None  # whether a stalled consumer's silent workers are gone
        self.dropped: DroppedReader | None = None  # reads the messages consumers dropped
        self.unpin_requests: UnpinRequestCapture | None = None  # who asked for unpins (API audit advisory)
        self.quorum: QuorumWatch | None = None  # QUORUM_LOST and LEADER_ELECTED as published
        self._capture_retry_at: float | None = None  # when to try the capture stream again (None: no need)

    async def write(self, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """fn in one transaction on the writer thread."""
        return await self._on_writer(lambda: self.store.write(fn))

    async def _on_writer(self, call: Callable[[], T]) -> T:
        """A store a newer jetwatch upgraded under this one takes no write of this one's again: the
        run stops and says so, instead of holding cycles in memory for a write that cannot come."""
        try:
            done = await asyncio.get_running_loop().run_in_executor(self._writer, call)
        except StoreTooNew as exc:
            self.fatal = exc
            self.probes.store_failed(str(exc))
            if self._stop is not None:
                self._stop.set()
            raise
        except Exception as exc:
            self.probes.store_failed(str(exc))
            raise
        self.probes.stored()
        return done

    def _make_filter(self) -> NameFilter:
        s = self.settings
        return NameFilter(s.include_streams, s.exclude_streams, s.include_consumers,
                          s.exclude_consumers, s.show_internal, s.capture_stream)

    async def start(self) -> None:
        # Before anything else is written: this store is this cluster's, or nothing is written at all.
        await self.write(lambda con: clusters.claim(con, self.settings.cluster, self.store.path))
        self.scope = self._learned or await account_scope(self.nc)
        known = await self.write(writes.latest_config_hashes)
        self.store_id = await self.write(writes.store_id)
        self.window = self._adopt(await asyncio.get_running_loop().run_in_executor(
            self._writer, load_window, self.store, self.clock(), self.thresholds))
        # The window pass compiled (or loaded from numba's cache) now, on the writer thread outside
        # any transaction: left to the first judge, a cold start compiled it for seconds inside the
        # first cycle's write, holding the store's lock while every reader waited.
        await asyncio.get_running_loop().run_in_executor(self._writer, compile_now)
        def stamp() -> str:
            return rfc3339(self.server_now())

        if self.system_nc is not None:
            self.sampler: Any = JszCollector(SystemJsz(self.system_nc, self.settings.request_timeout),
                                             self.name_filter, stamp)
        elif self.settings.monitor_url:
            self.sampler = JszCollector(HttpJsz(self.settings.monitor_url, self.settings.request_timeout,
                                                 self.settings.monitor_max_bytes),
                                        self.name_filter, stamp)
        else:
            self.sampler = ConsumerListCollector(self.api, self.scope, self.name_filter, stamp)
        stored = [i for i in range(len(self.window.keys)) if self.window.live[i]]
        self.sampler.remember([self.window.keys[i] for i in stored], [self.window.state["leader"][i] for i in stored])
        self.sampler.known_hashes = known
        s = self.settings
        self.lag = LagReader(self.nc, self.scope.account, concurrency=s.lag_concurrency, rotation=s.lag_rotation,
                             every=s.lag_every, timeout=min(2.0, s.request_timeout))
        if self.settings.metrics_address:
            if self.outputs.metrics is None:
                self.outputs.serve_metrics(self.settings.metrics_address, self.settings.metrics_cardinality,
                                           self.probes, self.settings.metrics_all_up_to)
            self.cycle_hooks.append(Collector._export_metrics)
        if self.settings.alertmanager:
            self.outputs.post_alerts(self.settings.alertmanager, self.settings.alert_after,
                                     self.settings.dashboard_url, self.settings.interval)
            self.cycle_hooks.append(Collector._send_alerts)
        stream = self.settings.capture_stream
        row = await self.write(lambda con: writes.capture_cursor(con, stream))
        self.gaps = GapTracker(Cursor(stream, row[0], row[1], row[2], awaiting_of(row[3])) if row else Cursor(stream, None, None, None))
        self.last_capture_gap_at = await self.write(writes.last_capture_gap)
        self.capture = await self._open_capture()
        await self._open_pin_holders()
        self.quorum = QuorumWatch(self.nc, self.scope.account, self._watched, lambda: self.server_now().timestamp(),
                                  self.system_nc)
        await self.quorum.open()
        if s.capture_unpin_requests:
            self.unpin_requests = UnpinRequestCapture(self.nc, self.scope.account, self.write, self.clock,
                                                      self._watched)
            await self.unpin_requests.open()
        self.dropped = DroppedReader(self.nc, self.scope.account, self.write, self.clock,
                                     timeout=min(2.0, s.request_timeout))

    async def _open_pin_holders(self) -> None:
        """Capture pin announcements, verified through whichever CONNZ this collector can ask."""
        s = self.settings
        connz = (SystemConnz(self.system_nc, s.request_timeout) if self.system_nc is not None
                 else HttpConnz(s.monitor_url, s.request_timeout, s.monitor_max_bytes) if s.monitor_url else None)
        self.pin_holders = PinHolderCapture(self.nc, connz, self.scope.account, self.write, self.clock)
        since = self.clock() - dt.timedelta(seconds=s.event_retention)
        await self.pin_holders.open(await self.write(lambda con: remembered_holders(con, since)))
        self.pull_settings = PullSettingsCapture(self.nc, connz, self.scope.account, self.write, self.clock)
        self.holders = HolderConnections(connz) if connz is not None else None
        recent = self.clock() - CURRENT_FOR
        await self.pull_settings.open(await self.write(lambda con: recent_settings(con, recent)))

    def _pulls(self, now: dt.datetime) -> PullsAnnounced | None:
        """What judging reads of the workers' pull settings: those announced lately, and the server's version."""
        if self.pull_settings is None:
            return None
        return PullsAnnounced(self.pull_settings.current(now), (self.nc._server_info or {}).get("version"),
                              self.holders.said if self.holders is not None else {})

    async def _open_capture(self) -> Capture:
        s = self.settings
        try:
            state = await open_capture_stream(self.api, s.capture_stream, s.capture_max_age, s.capture_max_bytes)
        except (JetStreamAPIError, NoReply) as exc:
            if not unavailable(exc):
                raise
            return await self._live_meanwhile(exc)
        self.capture_warning = state.warning if state else None
        if state is not None:
            durable = DurableCapture(self.nc, self.api, s.capture_stream, f"jetwatch-{self.store_id[:16]}",
                                     forget_after_s=s.capture_max_age)
            try:
                await self._follow_stream(state.created)
                assert self.gaps is not None
                created = await durable.open(self.gaps.start_seq())
                self._jump_reason = DURABLE_GONE if created and self.gaps.cursor.last_seq else DROPPED
                log.info("capturing advisories durably through stream %s", s.capture_stream)
                return durable
            except (JetStreamAPIError, NoReply) as exc:
                if unavailable(exc):
                    return await self._live_meanwhile(exc)
                log.warning("cannot read capture stream %s: %s", s.capture_stream, exc)
        log.warning(
            "advisories are captured with a plain subscription: pin events that happen while the "
            "collector is down will be missed. Run `jetwatch setup` with JetStream admin rights "
            "to create the capture stream %s.", s.capture_stream)
        core = CoreCapture(self.nc)
        await core.open()
        self.caught_up = True
        return core

    async def _live_meanwhile(self, exc: Exception) -> Capture:
        """The cluster's API does not answer (no meta leader, or the capture stream's servers gone):
        the collector runs all the same, to say so, listening to the advisories live, and tries the
        capture stream again every interval (`_capture_again`)."""
        self._capture_retry_at = time.monotonic() + self.settings.interval
        self.errors.report(f"the capture stream {self.settings.capture_stream} cannot be opened: the cluster's "
                           f"JetStream API does not answer ({exc}); advisories are captured with a plain "
                           "subscription until it does, and durably again from then on")
        core = CoreCapture(self.nc)
        await core.open()
        self.caught_up = True
        return core

    async def _follow_stream(self, created: str | None) -> None:
        """Note which incarnation of the capture stream is read; a new one is a gap, stored now."""
        assert self.gaps is not None
        now = self.clock()
        lost, cursor = self.gaps.on_stream(created, now)
        await self.write(lambda con: writes.write_capture_progress(con, lost, self._cursor_row(cursor, now)))
        self.gaps.commit(cursor)
        self._count_gaps(lost)
        for g in lost:
            self.errors.report(f"advisory capture has a gap after sequence {g['from_seq']}: {g['reason']}")

    def _count_gaps(self, gaps: list[dict[str, Any]]) -> None:
        """For /metrics: gaps since start, and when the newest was found (seeded from the store)."""
        if gaps:
            self.capture_gaps_total += len(gaps)
            self.last_capture_gap_at = max(g["detected_at"] for g in gaps)

    @staticmethod
    def _cursor_row(cursor: Cursor | None, now: dt.datetime) -> dict[str, Any] | None:
        if cursor is None:
            return None
        return {"stream": cursor.stream, "stream_created": cursor.stream_created, "last_seq": cursor.last_seq,
                "last_ts": cursor.last_ts, "updated_at": now, "awaiting": awaiting_json(cursor.awaiting)}

    async def _check_capture(self) -> None:
        """After a failed fetch: if the capture stream or its durable is gone, make them again
        (the gap this leaves is recorded), instead of failing every fetch from then on."""
        capture = self.capture
        if not isinstance(capture, DurableCapture):
            return
        try:
            await self.api.consumer_info(capture.stream, capture.durable)
            return  # still there: the failure was transient
        except (ConsumerNotFound, StreamNotFound) as exc:
            gone = f"the capture stream {capture.stream}" if isinstance(exc, StreamNotFound) else f"the durable {capture.durable}"
        await capture.close()
        self.capture = await self._open_capture()
        self.errors.report(f"{gone} disappeared while the collector ran; advisory capture was set up again "
                    f"({self.capture.mode})")

    def server_now(self, local: dt.datetime | None = None) -> dt.datetime:
        """Now on the server's clock, as last measured: sample and advisory times are the
        server's, so windows and inference cutoffs are judged on its clock, not this host's."""
        local = self.clock() if local is None else local
        return local + dt.timedelta(seconds=self.clock_offset or 0.0)

    @property
    def last_error(self) -> tuple[str, dt.datetime] | None:
        """The latest error and when it was reported, until a clean cycle is stored."""
        return self.errors.last

    async def _report_failed_cycle(self) -> None:
        """A cycle that could not be stored still says so: the status (last good cycle's
        figures, this error) goes in a transaction of its own, outside the one that failed."""
        if self.fatal is not None:  # nothing of this collector's is written any more
            return
        status = dict(self._last_status) if self._last_status else self._status(None, None, None, None)
        status.update(self._status_now())
        self.errors.said()
        try:
            await self.write(lambda con: writes.write_status(con, status))
        except Exception as exc:  # the store itself may be what failed: the log has it
            log.error("could not record the failed cycle in the store either: %s", exc)

    async def sample_once(self) -> int:
        """One sampling cycle; returns the number of consumers stored."""
        began = time.monotonic()
        batch = await self.sampler.collect()
        await self.fill_lag(batch)
        return await self.store_cycle(batch, began)

    async def fill_lag(self, batch: SampleBatch) -> LagStats | None:
        """The cycle's ages: every consumer that was not OK last cycle is read exactly, the rest in
        turn (collectors/lag.py). A failure here costs the ages, never the cycle."""
        if self.lag is None:
            return None
        urgent: set[tuple[str, str, str]] = set()
        if self.judged is not None and not self.judged.consumers.empty:
            c = self.judged.consumers
            bad = c[c["verdict"] != "OK"]
            urgent = set(zip(bad["account"], bad["stream"], bad["consumer"]))
        try:
            stats = await self.lag.fill(batch, urgent)
        except Exception as exc:  # ages are extra: the counts still go in
            log.exception("reading time lag failed")
            batch.errors.append(f"reading time lag failed: {type(exc).__name__}: {exc}")
            return None
        refused = sorted(set(stats.denied_streams) - self._lag_refused)
        if refused:  # said once per stream: a deployment may withhold message reads on purpose
            self._lag_refused.update(refused)
            batch.errors.append(
                f"time lag: reading messages of stream(s) {', '.join(refused)} got no reply, so their ages are "
                "estimates (marked as such) and are tried again every 5 minutes; for exact ages allow the "
                "collector's user $JS.API.DIRECT.GET.<stream> and $JS.API.STREAM.MSG.GET.<stream>")
        return stats

    async def store_cycle(self, batch: SampleBatch, began: float | None = None) -> int:
        """Store one cycle's batch (samples, configs, rejects, inferred pins, status), then judge it."""
        await self.queue_cycle(batch, began)
        await self.write_queued()
        return batch.consumers

    async def queue_cycle(self, batch: SampleBatch, began: float | None = None) -> PendingCycle:
        """A sampled cycle into the write backlog, with what the store is told about it; nothing
        is written here, so a store held by another process never holds up sampling."""
        began = time.monotonic() if began is None else began
        now = self.clock()
        if batch.server_now is not None:
            self.clock_offset = (batch.server_now - now).total_seconds()
        if self.capture is not None:
            self.capture_pending = await self._capture_backlog(began)
            self.caught_up = self.capture_pending == 0
        self.errors.settle(batch.errors + ([self.outputs.alert_failure] if self.outputs.alert_failure else [])
                           + self._unlisted_words())
        if self.quorum is not None and self.quorum.lost:  # nothing to add most cycles: no set of every key built
            self._quorum_evidence(batch, self.server_now(now).timestamp(), time.monotonic() - began)
        state_rejects = self.reject_budget.admit("consumer_state", now, batch.rejects)
        self.rejects_total += len(batch.rejects)
        kept = [*batch.failed_streams, *batch.rejected_consumers, *batch.unanswered,
                *(key for key in batch.evidence if len(key) == 3)]
        cycle = PendingCycle(now, sorted(batch.accounts), batch.samples, batch.configs, state_rejects.rows,
                             state_rejects.dropped, kept, arrow=batch.arrow, evidence=batch.evidence,
                             cluster_findings=batch.cluster_findings,
                             status=self._status(now, time.monotonic() - began, batch.streams, batch.consumers),
                             server_now=self.server_now(now), caught_up=self.caught_up, began=began)
        # Behind any cycles the store could not take yet: written together, oldest first.
        dropped = self.backlog.dropped_cycles
        self.backlog.add(cycle)
        if self.backlog.dropped_cycles > dropped:
            self.errors.report(f"the store stayed unwritable past --write-backlog {self.settings.write_backlog} samples: "
                        f"{self.backlog.dropped_cycles} oldest cycle(s), {self.backlog.dropped_samples} samples, given up")
        return cycle

    def _quorum_evidence(self, batch: SampleBatch, now: float, took: float) -> None:
        """The QUORUM_LOST advisories heard by subscription join the cycle's evidence, for each
        consumer the cycle could not sample; one sampled afresh has a leader again."""
        assert self.quorum is not None
        sampled = set(zip(batch.samples["account"], batch.samples["stream"], batch.samples["consumer"]))
        self.quorum.sampled(sampled, now - took)
        if self.window is not None:
            self.quorum.keep_only(self.window.window.rows)
        for key, ev in self.quorum.evidence(now).items():
            if key not in sampled:
                batch.evidence[key] = ev  # the server's own word, over what a listing left unsaid

    def begin_capture_backlog(self) -> None:
        """Ask how far the capture's durable is behind beside the cycle's sampling, not after it."""
        if self.capture is not None and self._backlog is None:
            self._backlog = asyncio.get_running_loop().create_task(self.capture.backlog())
            # Read here too: a run that stops before the cycle waits for it leaves its failure unread.
            self._backlog.add_done_callback(lambda task: task.cancelled() or task.exception())

    async def _capture_backlog(self, began: float) -> int | None:
        """Advisories captured and not yet stored (None: not known this cycle). Waited for only
        until the cycle's interval is nearly spent: a capture stream whose server is gone answers
        nothing, and must not hold up the sampling of the consumers that still answer."""
        task, self._backlog = self._backlog, None
        if task is None:
            self.begin_capture_backlog()
            task, self._backlog = self._backlog, None
        assert task is not None
        budget = max(1.0, began + self.settings.interval - 0.5 - time.monotonic())
        try:
            return await asyncio.wait_for(task, budget)
        except (JetStreamAPIError, NoReply, TimeoutError):
            return None

    async def write_queued(self) -> None:
        """Write every cycle waiting in the backlog, oldest first, in one transaction with the newest
        one's status, and judge them there. One write at a time (`_writing`): cycles sampled while a
        write waits for the file join the next one."""
        async with self._writing:
            pending = self.backlog.pending()
            if pending:
                await self._write_cycles(pending)

    async def _write_cycles(self, pending: list[PendingCycle]) -> None:
        newest = pending[-1]
        status, server_now, caught_up = newest.status, newest.server_now, newest.caught_up
        thresholds = self.thresholds
        window = self.window
        touched = []  # the state took this cycle's samples: a rollback leaves it ahead of the store

        pulls = self._pulls(server_now)

        def tx(con: duckdb.DuckDBPyConnection) -> tuple[LiveState, tuple[JudgedCycle, tuple[pd.DataFrame, dt.datetime]] | BaseException]:
            if window is not None:
                touched.append(True)
            # None yet, or dropped by a failed cycle: as the store holds it before this cycle.
            state = window if window is not None else self._adopt(LiveState.seeded(con, server_now,
                                                                                   thresholds.health_window))
            if self.unlisted:  # an operator may have forgotten some (an audited forget): they leave now
                self._forgotten(con)
            for cycle in pending:
                # Into the state first: it tells which consumers no longer listed it holds, and the
                # store keeps them too (the state holds what the store holds).
                held = state.add(cycle.samples, cycle.accounts, cycle.kept, cycle.configs)
                writes.write_samples(con, cycle.accounts, cycle.samples, [*cycle.kept, *held], cycle.at, cycle.arrow)
                writes.write_configs(con, cycle.configs)
                writes.write_rejects(con, cycle.at, "consumer_state", cycle.rejects)
                writes.write_dropped_rejects(con, cycle.dropped_rejects)
            if caught_up:  # cutoffs on the server's clock: the times compared are the server's
                writes.reconcile_pins(con, server_now, self.settings.inference_grace)
            writes.write_status(con, status)
            # Judged in the same transaction: a cycle's samples and their verdicts are kept together,
            # on one connection (opening the file and committing cost more than the judging).
            try:
                verdicts = judge(state, server_now, thresholds, event_counts(con, server_now, thresholds), pulls,
                                 newest.evidence, newest.cluster_findings)
            except Exception as exc:  # a fault in judging costs the verdicts, never the samples
                return state, exc
            keep(con, verdicts)
            return state, (verdicts, self._settled_moves(con, server_now))

        try:
            state, judged = await self.write(tx)
        except StoreTooNew:
            raise
        except StoreError as exc:
            if touched:  # it holds samples the rollback took back: seeded again with the next cycle
                self.window = None
            raise StoreError(f"{exc} The cycle is kept: {len(self.backlog)} cycle(s), {self.backlog.samples} "
                             "samples wait in memory and are written with the next write that gets the file; "
                             "sampling goes on meanwhile.") from None
        except BaseException:
            if touched:
                self.window = None
            raise
        self.backlog.written(pending)
        self._last_status = status
        self.errors.cycle_written()
        self.window = state  # the state holds what the store holds, no more
        if isinstance(judged, BaseException):
            raise judged
        cycle, (moves, forget_before) = judged
        self.move_counts.add(moves, forget_before)
        cycle.commit()
        self.judged = cycle
        self.seen = set(zip(newest.samples["account"], newest.samples["stream"], newest.samples["consumer"]))
        self.cycles += len(pending)
        self.durations.observe(time.monotonic() - newest.began)
        say_shown(cycle.cluster_new)
        self.schedule.judged(cycle.cluster_due, server_now.timestamp(), time.monotonic() - newest.began)
        await self._after_cycle(cycle, time.monotonic() - newest.began)

    # Pin moves are counted for /metrics once their cause is settled, and at most this long after.
    MOVES_HORIZON = dt.timedelta(minutes=10)

    def _settled_moves(self, con: Any, server_now: dt.datetime) -> tuple[pd.DataFrame, dt.datetime]:
        """Pin moves since the collector started (within MOVES_HORIZON) whose cause is settled: more
        than --deploy-window ago, so a deploy's later moves and an inferred unpin's grace are in."""
        started = self.server_now(self.started_at)
        since = max(started, server_now - self.MOVES_HORIZON)
        until = server_now - dt.timedelta(seconds=self.settings.deploy_window)
        counted = sum(1 for t in self.move_counts.counted.values() if since <= t <= until)
        if until <= since or con.execute(sql.query("unpins_between"), {"since": since, "until": until}
                                         ).fetchone()[0] <= counted:  # nothing new: no need to ask why
            return pd.DataFrame(columns=pin_causes.COLUMNS), since
        # CONNZ is asked about a timed-out holder within --request-timeout of the unpin's capture.
        checked_by = until - dt.timedelta(seconds=2 * self.settings.request_timeout)
        return pin_causes.settled(pin_causes.moves(con, since, until, self.settings), checked_by), since

    def labelled(self, judged: JudgedCycle) -> pd.DataFrame:
        """The consumers as they leave the collector (/metrics, alerts): `cluster` is this
        collector's --cluster label, the fleet's name for the cluster (not the NATS cluster name
        the server reports, which the samples keep); each with its silence where one holds."""
        silenced = silences.attach(judged.consumers, judged.silences, judged.at)
        return silenced.assign(cluster=self.settings.cluster)

    def snapshot(self, judged: JudgedCycle) -> Snapshot:
        """The cycle as the exporters see it (copies: rendering runs on another thread)."""
        return Snapshot(at=judged.at, consumers=self.labelled(judged),
                        holders=dict(self.pin_holders.holders) if self.pin_holders else {},
                        pins=self.pin_counts.copy(), drops=self.drop_counts.copy(), moves=self.move_counts.copy(),
                        holder_pulls=self.settings.holder_pulls, cluster=self.settings.cluster,
                        cycle_buckets=list(self.durations.counts), cycle_sum=self.durations.total,
                        cycles=self.cycles, capture_backlog=self.capture_pending, rejects=self.rejects_total,
                        capture_gaps=self.capture_gaps_total, last_capture_gap_at=self.last_capture_gap_at)

    @property
    def metrics_bound(self) -> tuple[str, int] | None:
        """Where /metrics is served, once it is."""
        return self.outputs.metrics_bound

    @property
    def alertmanager(self) -> AlertmanagerClient | None:
        return self.outputs.alertmanager

    async def _export_metrics(self, judged: JudgedCycle, seconds: float) -> None:
        """Render /metrics once per cycle, without holding up the next (exporters/cycle_outputs.py)."""
        self.outputs.render(lambda: self.snapshot(judged))

    async def _send_alerts(self, judged: JudgedCycle, seconds: float) -> None:
        """This cycle's alerts to Alertmanager, without waiting for the post (exporters/cycle_outputs.py)."""
        self.outputs.send_alerts(self.labelled(judged), judged.changes, judged.at,
                                 dict(self.pin_holders.holders) if self.pin_holders else {})

    async def _after_cycle(self, judged: JudgedCycle, seconds: float) -> None:
        """Hand the cycle's verdicts to the exporters (metrics, alerts), if any are on; ask CONNZ
        whether the silent holders of stalled consumers are gone or stopped, for the next cycle."""
        if self.holders is not None and self.pull_settings is not None and (judged.silent_holders or self.holders.said):
            self.holders.ask(judged.silent_holders, self.pull_settings.current(self.clock()), self.clock())
        for hook in self.cycle_hooks:
            try:
                await hook(self, judged, seconds)
            except Exception as exc:  # an exporter never costs a cycle
                log.exception("exporting the cycle failed")
                self.errors.report(f"exporting the cycle failed: {type(exc).__name__}: {exc}")

    @property
    def sample_mode(self) -> str:
        return "system_jsz" if self.system_nc is not None else "jsz" if self.settings.monitor_url else "consumer_list"

    def _status(self, now: dt.datetime | None, seconds: float | None, streams: int | None,
                consumers: int | None) -> dict[str, Any]:
        return {
            "collector": self.name, "started_at": self.started_at, "last_cycle_at": now,
            "cycle_seconds": seconds, "streams": streams, "consumers": consumers,
            "sample_mode": self.sample_mode, **self._status_now(),
        }

    def _status_now(self) -> dict[str, Any]:
        """The parts of the status that hold between cycles (capture, errors, connection)."""
        return {
            "capture_mode": self.capture.mode if self.capture else None,
            "capture_pending": self.capture_pending, "capture_caught_up": self.caught_up,
            "last_event_at": self.last_event_at,
            "last_error": self.errors.shown()[0], "last_error_at": self.errors.shown()[1],
            "server_url": strip_userinfo(self.nc.connected_url.geturl()) if self.nc.connected_url else None,
            "clock_offset_seconds": self.clock_offset, "capture_warning": self.capture_warning,
        }

    def _adopt(self, state: LiveState) -> LiveState:
        """A live state this collector judges with: it holds the consumers no longer listed that
        its filters watch, and shares what it knows of them across a state seeded again."""
        state.holds = self._watched_key
        state.unlisted, state.removed = self.unlisted, self.removed
        return state

    def _watched_key(self, key: tuple[str, str, str]) -> bool:
        return self.name_filter.stream_ok(key[1]) and self.name_filter.consumer_ok(key[2])

    def _forgotten(self, con: duckdb.DuckDBPyConnection) -> None:
        """The consumers held unlisted that an operator forgot (an audited forget made after it was
        last listed, its time on this collector's clock set to the server's): they leave now. A
        forget older than that is of an earlier absence, and one of a consumer not held is moot."""
        offset = self.clock_offset or 0.0
        since = dt.datetime.fromtimestamp(min(self.unlisted.values()) - offset, dt.UTC)
        for account, stream, consumer, ts in con.execute(sql.query("forgotten_since"), {"since": since}).fetchall():
            key = (str(account), str(stream), str(consumer))
            unlisted = self.unlisted.get(key)
            if unlisted is not None and pd.Timestamp(ts).timestamp() + offset >= unlisted:
                self.removed.add(key)

    def _unlisted_words(self) -> list[str]:
        if not self.unlisted:
            return []
        names = [f"{stream}/{consumer}" for _, stream, consumer in sorted(self.unlisted)]
        first = min(self.unlisted.values())
        return [f"{len(names)} consumer(s) no longer listed by the server, and no DELETED advisory said they were "
                f"removed ({', '.join(names[:5])}{' …' if len(names) > 5 else ''}), the first since "
                f"{dt.datetime.fromtimestamp(first, dt.UTC):%H:%M:%S} UTC: kept with their last known state. If they "
                "were deleted while no advisory was captured, `jetwatch forget` them"]

    def _note_removals(self, rows: list[AdvisoryRow]) -> None:
        """A DELETED advisory says a consumer was removed: once no longer listed, it leaves. A
        CREATED one after it (the name used again) takes that back."""
        known = self.window.window.rows if self.window is not None else {}
        for row in rows:
            subject = row["subject"]
            key = (str(row["account"]), str(row["stream"]), str(row["consumer"]))
            if subject.startswith(f"{ADVISORY_PREFIX}DELETED."):
                if key in known:  # one never sampled (an ephemeral come and gone between cycles) has nothing to end
                    self.removed.add(key)
            elif subject.startswith(f"{ADVISORY_PREFIX}CREATED."):
                self.removed.discard(key)

    async def events_once(self) -> int:
        """Fetch, store, then acknowledge one batch of advisories; returns how many were read."""
        assert self.capture is not None
        fetched = await self.capture.fetch()
        if not fetched.messages:
            return 0
        now = self.clock()
        rows: list[AdvisoryRow] = []
        rejects: list[tuple[str, str, str]] = []
        for subject, data in fetched.messages:
            try:
                row = parse_advisory(subject, data, self.scope.account, rfc3339(now))
            except MalformedAdvisory as exc:
                rejects.append((subject, str(exc), data.decode("utf-8", "replace")))
                continue
            except Exception as exc:  # whatever one message trips over, it is rejected alone
                log.warning("an advisory on %s could not be read (%s: %s); it goes to rejects", subject,
                            type(exc).__name__, exc)
                rejects.append((subject, f"could not be read: {type(exc).__name__}: {exc}",
                                data.decode("utf-8", "replace")))
                continue
            if self._watched(row["stream"], row["consumer"]):
                rows.append(row)
        gaps: list[dict[str, Any]] = []
        cursor = None
        if self.gaps is not None and fetched.positions:
            first_seq = await self.capture.first_seq() if self.gaps.skips(fetched.positions) else None
            gaps, cursor = self.gaps.observe(fetched.positions, now, self._jump_reason, first_seq)
        progress = (gaps, self._cursor_row(cursor, now))
        try:
            await self._store_advisories(now, rows, rejects, progress)
        except UNAVAILABLE:
            raise
        except Exception as exc:  # a value the checks did not foresee: find it, store the rest
            log.warning("the store refused a batch of advisories (%s: %s); storing them one by one",
                        type(exc).__name__, exc)
            rows, refused = await self._store_one_by_one(rows)
            rejects += refused
            await self._store_advisories(now, [], rejects, progress)
        await self.capture.ack(fetched)  # only now: the rows are committed
        if cursor is not None and self.gaps is not None:
            self.gaps.commit(cursor)
            self._jump_reason = DROPPED
        self._count_gaps(gaps)
        for g in gaps:
            self.errors.report(f"{g['missed']} advisories lost from the capture stream (sequences {g['from_seq']}-"
                        f"{g['to_seq']}): {g['reason']}")
        self._note_removals(rows)
        self.pin_counts.add(rows)
        self.drop_counts.add(rows)
        if self.pin_holders is not None:  # what CONNZ says of a timed-out holder's connection, asked apart
            self.pin_holders.exits_to_check(rows)
        if self.dropped is not None and drops_in(rows):
            self.dropped.more = True
        self.rejects_total += len(rejects)
        self.last_event_at = now
        return len(fetched.messages)

    async def _store_advisories(self, now: dt.datetime, rows: list[AdvisoryRow],
                                rejects: list[tuple[str, str, str]],
                                progress: tuple[list[dict[str, Any]], dict[str, Any] | None] = ([], None)) -> None:
        admitted = self.reject_budget.admit("advisory", now, rejects)

        def tx(con: duckdb.DuckDBPyConnection) -> None:
            writes.write_advisories(con, rows)
            writes.write_capture_progress(con, *progress)
            writes.write_rejects(con, now, "advisory", admitted.rows)
            writes.write_dropped_rejects(con, admitted.dropped)

        await self.write(tx)

    async def _store_one_by_one(self, rows: list[AdvisoryRow]) -> tuple[list[AdvisoryRow], list[tuple[str, str, str]]]:
        """Each advisory in a transaction of its own: those the store refuses come back as rejects."""
        stored: list[AdvisoryRow] = []
        refused: list[tuple[str, str, str]] = []
        for row in rows:
            try:
                await self.write(functools.partial(writes.write_advisories, rows=[row]))
                stored.append(row)
            except UNAVAILABLE:
                raise
            except Exception as exc:  # this message's own fault, whatever it raised
                refused.append((row["subject"], f"the store refused it: {type(exc).__name__}: "
                                                f"{' '.join(str(exc).split())}", row["raw"]))
        return stored, refused

    def _watched(self, stream: str | None, consumer: str | None) -> bool:
        """Whether the name filter keeps what an advisory or an unpin request names (a name not given passes)."""
        f = self.name_filter
        return (stream is None or f.stream_ok(stream)) and (consumer is None or f.consumer_ok(consumer))

    async def _sample_loop(self, stop: asyncio.Event) -> None:
        """A cycle every `interval`, whatever the store does: a cycle goes into the write backlog and
        is written by a task of its own (`_store_task`), so a file held by another process (a long
        read, a duckdb shell) delays the writes, never the sampling; the cycles sampled meanwhile
        are written together once it lets go."""
        storing: asyncio.Task[None] | None = None
        try:
            while not stop.is_set():
                began = time.monotonic()
                self.schedule.began(began)
                sampled = True
                try:
                    self.begin_capture_backlog()
                    if self.lag is not None:
                        self.lag.begin()
                    batch = await self.sampler.collect()
                    await self.fill_lag(batch)
                    await self.queue_cycle(batch, began)
                except (NoReply, JetStreamAPIError, OSError) as exc:
                    sampled = False
                    self.errors.report(f"sampling failed: {exc}")
                except Exception as exc:  # keep collecting whatever one cycle trips over
                    sampled = False
                    log.exception("sampling cycle failed")
                    self.errors.report(f"sampling failed: {type(exc).__name__}: {exc}")
                if storing is None or storing.done():
                    storing = asyncio.create_task(self._store_task(sampled, began + self.settings.interval, stop))
                elif sampled:
                    log.info("the store is still taking an earlier write: this cycle waits in memory "
                             "(%d cycle(s) waiting)", len(self.backlog))
                self.gc.between_cycles()
                self.probes.cycle_ended()
                await self.schedule.wait(began, stop)
        finally:
            if storing is not None:  # the write under way ends (bounded by --lock-timeout) before shutdown
                await storing
        if self.backlog.pending() and self.fatal is None:  # the last cycles, once more before stopping
            await self._store_task(True, time.monotonic(), stop)

    async def _store_task(self, sampled: bool, next_cycle: float, stop: asyncio.Event) -> None:
        """Write what waits in the backlog (or, after a cycle that sampled nothing, the status that
        says so), then seal if a pass is due. Failures are said in the collector's error; the
        cycles stay in the backlog for the next write."""
        stored = True
        try:
            if sampled:
                await self.write_queued()
            else:
                await self._report_failed_cycle()
        except StoreTooNew:
            return  # the run stops (`_on_writer`): nothing of this collector's is written any more
        except StoreError as exc:
            stored = False
            self.errors.report(f"sampling failed: {exc}")
            await self._report_failed_cycle()
        except Exception as exc:  # a cycle's own fault never stops the collector
            log.exception("storing the cycle failed")
            self.errors.report(f"sampling failed: {type(exc).__name__}: {exc}")
            await self._report_failed_cycle()
        if stored and not stop.is_set():  # a store that just refused a write is not asked for a sealing pass too
            await self._seal_between_cycles(next_cycle, stop)

    async def seal_once(self) -> Sealed:
        """One sealing pass on the writer thread, between cycles (store/sealing.py): a span at most,
        so that no pass holds the file (and the pages waiting on it) for long."""
        began = time.monotonic()
        sealed = await self._on_writer(lambda: seal_pass(self.store, dt.timedelta(seconds=self.settings.seal_every)))
        self.sealed = sealed
        self._seal_at = time.monotonic() + sealed.next_in.total_seconds()
        if sealed.rows and sealed.until is not None:
            log.info("sealed %s samples before %s in %.1fs%s", sealed.rows, sealed.until.isoformat(),
                     time.monotonic() - began, " (catching up: another span waits)" if sealed.behind else "")
        return sealed

    async def _seal_between_cycles(self, next_cycle: float, stop: asyncio.Event) -> None:
        """The pass that is due, and while spans wait (a store upgraded with days of unsealed
        samples), more of them in the time left before the next cycle: one a cycle would take a
        day to catch up on a week."""
        while time.monotonic() >= self._seal_at and not stop.is_set():
            began = time.monotonic()
            try:
                sealed = await self.seal_once()
            except Exception as exc:  # the samples stay where they are, readable; the next cycle tries again
                if not isinstance(exc, StoreError):
                    log.exception("sealing samples failed")
                self.errors.report(f"sealing samples failed (they stay readable, unsealed; tried again next cycle): {exc}")
                self._seal_at = time.monotonic() + self.settings.interval
                return
            if not sealed.behind or time.monotonic() + (time.monotonic() - began) > next_cycle:
                return

    async def retain_once(self) -> dict[str, int]:
        """One retention pass on the writer thread (never between a cycle's samples and its
        verdicts), then CHECKPOINT to reclaim the space, then forget config hashes and pin counters of
        consumers no longer sampled (those maps would otherwise grow with every name ever seen)."""
        s = self.settings
        cutoffs = Cutoffs.at(self.clock(), s.raw_retention, s.event_retention)
        deleted = await self.write(lambda con: prune(con, cutoffs, self.name))
        await asyncio.get_running_loop().run_in_executor(self._writer, self.store.checkpoint)
        if self.cycles and hasattr(self.sampler, "known_hashes"):
            self.sampler.known_hashes = {k: v for k, v in self.sampler.known_hashes.items() if k in self.seen}
        if self.cycles:  # pin counters of consumers no longer sampled (or never: forged advisories' names)
            self.pin_counts.keep_only(self.seen)
            self.drop_counts.keep_only(self.seen)
            self.move_counts.keep_only(self.seen)
        self.retained = deleted
        if any(deleted.values()):
            log.info("retention: deleted %s", ", ".join(f"{n.removeprefix('retention_')} {c}"
                                                        for n, c in deleted.items() if c))
        return deleted

    async def _retention_loop(self, stop: asyncio.Event) -> None:
        """Retention on a schedule, first once the collector has started."""
        while not stop.is_set():
            try:
                await self.retain_once()
            except StoreError as exc:  # the next pass tries again; nothing is lost by waiting
                self.errors.report(f"retention failed: {exc}")
            try:
                await asyncio.wait_for(stop.wait(), self.settings.retention_every)
            except TimeoutError:
                pass

    async def read_dropped(self) -> None:
        """Read the messages behind newly stored drops while the stream may still have them; a
        failure here costs the subjects and times of this pass, never the advisories."""
        if self.dropped is None or not self.dropped.more:
            return
        try:
            await self.dropped.read_pending()
        except StoreError:
            raise
        except Exception as exc:  # the next drop (or restart) tries again
            log.warning("reading dropped messages failed: %s: %s", type(exc).__name__, exc)
            self.dropped.more = False

    async def _capture_again(self) -> None:
        """A capture that fell back to a plain subscription because the API did not answer at
        start: the capture stream is tried again every interval, and read durably once it answers
        (from where the store's cursor stands; what both captured is stored once, by its id)."""
        if self._capture_retry_at is None or time.monotonic() < self._capture_retry_at:
            return
        self._capture_retry_at = None
        fallback = self.capture
        self.capture = await self._open_capture()
        if isinstance(self.capture, DurableCapture) and fallback is not None:
            await fallback.close()
            log.info("the cluster's JetStream API answers again: advisories are captured durably through %s",
                     self.settings.capture_stream)
        elif fallback is not None and self.capture is not fallback:
            await self.capture.close()
            self.capture = fallback

    async def _event_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self._capture_again()
                await self.events_once()
                await self.read_dropped()
            except StoreError as exc:
                self.errors.report(f"storing advisories failed (they stay in the capture stream): {exc}")
            except Exception as exc:
                if self.nc.is_closed:
                    return
                log.warning("advisory fetch failed: %s", exc)
                try:
                    await self._check_capture()
                except Exception as again:  # the server may be restarting: try again next round
                    log.warning("could not set advisory capture up again: %s", again)
                try:
                    await asyncio.wait_for(stop.wait(), 0.5)
                except TimeoutError:
                    pass

    async def run(self, stop: asyncio.Event) -> None:
        self.gc.apply()
        beat = asyncio.create_task(self.probes.beat()) if self._beats else None
        try:
            await self._run(stop)
        finally:  # however the run ends, its shutdown included
            if beat is not None:
                beat.cancel()
            self.gc.restore()

    async def _learn_account(self, stop: asyncio.Event) -> bool:
        """Which account this connection is in, as the server says, before anything is sampled:
        every consumer, advisory and pin is kept under its account, and a guessed one (`$G`) would
        file another account's consumers, or an unknown one's, under the global account's name, for
        actions to act on and audit in that name. Until the server says, nothing is sampled, the
        status says why (the sidebar, `jetwatch status`), and it is asked again every interval.
        False if stopped first."""
        while not stop.is_set():
            try:
                self.probes.stage = "asking the server which account this connection is in"
                self._learned = await account_scope(self.nc)
                self.probes.stage = "starting to sample"
                return True
            except AccountUnknown as exc:
                self.probes.stage = f"nothing is sampled: {exc}"
                self.errors.report(f"nothing is sampled: {exc}")
                await self._report_failed_cycle()
            try:
                await asyncio.wait_for(stop.wait(), self.settings.interval)
            except TimeoutError:
                pass
        return False

    async def _run(self, stop: asyncio.Event) -> None:
        self._stop = stop
        try:
            if not await self._learn_account(stop):
                return
            await self.start()
            assert self.pin_holders is not None
            await asyncio.gather(self._sample_loop(stop), self._event_loop(stop), self._retention_loop(stop),
                                 self.pin_holders.run(stop), self.pin_holders.run_exits(stop),
                                 *([self.pull_settings.run(stop)] if self.pull_settings is not None else []),
                                 *([self.unpin_requests.run(stop)] if self.unpin_requests is not None else []))
            if self.fatal is not None:  # what was not written is lost: the message says why
                raise self.fatal
            # Last flush: whatever arrived before the stop is stored and acknowledged.
            try:
                for _ in range(10):
                    if not await self.events_once():
                        break
            except Exception as exc:  # what is not acknowledged stays in the capture stream
                log.warning("the last advisory flush failed: %s", exc)
        finally:
            if self._backlog is not None:
                self._backlog.cancel()
            if self.capture is not None:
                await self.capture.close()
            if self.pin_holders is not None:
                await self.pin_holders.close()
            if self.pull_settings is not None:
                await self.pull_settings.close()
            if self.unpin_requests is not None:
                await self.unpin_requests.close()
            if self.quorum is not None:
                await self.quorum.close()
            self._writer.shutdown(wait=True)
            self.outputs.close()  # a post under way is cut: stopping never waits on Alertmanager
