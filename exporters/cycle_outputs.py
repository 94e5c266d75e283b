"""The outputs a collector hands each judged cycle to (/metrics, Alertmanager), each on a worker
thread of its own, so that neither ever holds up the collector's event loop: a full-cardinality
render of a large fleet takes a while, and an Alertmanager that is slow or down would delay
sampling. A render or a post still under way when the next cycle ends is not queued behind it:
that cycle's is skipped (firing alerts go again next cycle; resolved ones wait in the client until
delivered). What fails here is told to the collector (`report`), which says it in its status.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pandas as pd

from jetwatch.core.pin_announce import HolderKey
from jetwatch.exporters.alertmanager import AlertmanagerClient
from jetwatch.exporters.cycle_snapshot import Snapshot
from jetwatch.exporters.metrics import ALL_UP_TO
from jetwatch.exporters.metrics_server import MetricsExporter
from jetwatch.exporters.probes import Probes

log = logging.getLogger("jetwatch.collector")


class CycleOutputs:
    """The outputs that are on, and the one worker thread each renders or posts on."""

    def __init__(self, report: Callable[[str], None], metrics: MetricsExporter | None = None) -> None:
        self.report = report  # the collector's error: a failed render or post is said in its status
        self.metrics = metrics  # already serving, when given
        self.metrics_bound: tuple[str, int] | None = metrics.bound if metrics is not None else None
        self.alertmanager: AlertmanagerClient | None = None
        self.alert_failure: str | None = None  # why the latest post to Alertmanager failed, until one succeeds
        self._render = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jetwatch-render")
        self._rendering: asyncio.Future[bytes] | None = None
        self._alerts_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jetwatch-alerts")
        self.alert_post: asyncio.Future[None] | None = None  # the latest post, under way or done

    def serve_metrics(self, address: str, cardinality: str, probes: Probes | None = None,
                      all_up_to: int = ALL_UP_TO) -> None:
        self.metrics = MetricsExporter(cardinality, probes, all_up_to)
        self.metrics_bound = self.metrics.serve(address)

    def post_alerts(self, url: str, after_s: float, dashboard_url: str, interval_s: float) -> None:
        self.alertmanager = AlertmanagerClient(url, after_s, dashboard_url, interval_s)

    def render(self, snapshot: Callable[[], Snapshot]) -> None:
        """Render /metrics from this cycle's snapshot (made only when a render starts), on the render
        thread, unless the previous render is still under way."""
        assert self.metrics is not None
        if self._rendering is not None and not self._rendering.done():
            return
        self._rendering = asyncio.get_running_loop().run_in_executor(self._render, self.metrics.render, snapshot())
        self._rendering.add_done_callback(self._rendered)

    def _rendered(self, done: asyncio.Future[bytes]) -> None:
        if not done.cancelled() and done.exception() is not None:
            self.report(f"rendering /metrics failed: {type(done.exception()).__name__}: {done.exception()}")

    def send_alerts(self, consumers: pd.DataFrame, changes: pd.DataFrame, at: dt.datetime,
                    holders: dict[HolderKey, tuple[str, str]]) -> None:
        """Firing alerts (every cycle) and resolved ones to Alertmanager, on the alerts thread and
        without waiting, unless the previous post is still under way."""
        assert self.alertmanager is not None
        alerts = self.alertmanager.alerts_for(consumers, changes, at, holders)
        if not alerts:
            return
        if self.alert_post is not None and not self.alert_post.done():
            log.warning("the previous post to Alertmanager is still under way (it ends within %gs); sending "
                        "next cycle", self.alertmanager.timeout_s)
            return
        self.alert_post = asyncio.get_running_loop().run_in_executor(self._alerts_pool, self.alertmanager.post, alerts)
        self.alert_post.add_done_callback(self._alert_posted)

    def _alert_posted(self, done: asyncio.Future[Any]) -> None:
        """A failed post is the collector's error until a post gets through: each cycle's status
        says it (`alert_failure` joins the cycle's errors), not only the cycle after it failed."""
        if done.cancelled():
            return
        if done.exception() is not None:
            self.alert_failure = f"alerting failed: {done.exception()}"
            self.report(self.alert_failure)
        else:
            self.alert_failure = None

    def close(self) -> None:
        """After the collector's writes: a render under way ends, a post under way is cut (stopping
        never waits on Alertmanager), then /metrics stops being served."""
        self._render.shutdown(wait=True)
        if self.alertmanager is not None:
            self.alertmanager.abort()
        self._alerts_pool.shutdown(wait=True)
        if self.metrics is not None:
            self.metrics.close()
