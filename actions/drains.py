"""Drains that outlive the page that started them: their state and progress live in the store.

A drain started from the dashboard runs as its own process (`jetwatch drain ... --drain-id`), in
its own session, so a rerun or a closed tab neither kills nor orphans it; the page reads its
progress back from the `drains` table.
"""

from __future__ import annotations

import subprocess
import threading
import sys
import time
from pathlib import Path

import duckdb
import pandas as pd

from jetwatch import sql
from jetwatch.actions.audit import begin
from jetwatch.actions.operations import ActionResult, DrainPlan, Target, utcnow
from jetwatch.core.children import NATS_SECRETS, child_env
from jetwatch.core.settings import Settings
from jetwatch.store.database import Store, StoreError


class DrainTracker:
    """Writes a drain's progress to the store, at most about once a second."""

    def __init__(self, store: Store, drain_id: str, actor: str, target: Target, then: str, every_s: float = 1.0):
        self.store, self.drain_id, self.actor, self.target, self.then = store, drain_id, actor, target, then
        self.every_s = every_s
        self.started = utcnow()
        self._last = 0.0
        self.start_pending: int | None = None

    def _write(self, state: str, now_pending: int | None, message: str | None) -> None:
        t = self.target
        row = [self.drain_id, self.started, utcnow(), self.actor, t.account, t.stream, t.consumer, self.then, state,
               self.start_pending, now_pending, message]
        try:
            self.store.write(lambda con: con.execute(sql.query("upsert_drain"), row))
        except (StoreError, duckdb.Error):
            pass  # progress is best effort; the drain itself goes on (and its audit rows say how it ended)

    def progress(self, state: str, start: int, now_pending: int | None, elapsed: float) -> None:
        self.start_pending = start
        if state != "draining":
            return  # the end state is written by finish(), after the audit row
        if time.monotonic() - self._last < self.every_s:
            return
        self._last = time.monotonic()
        self._write(state, now_pending, f"{elapsed:.1f}s")

    def finish(self, result: ActionResult) -> None:
        state = "done" if result.ok else ("timed_out" if "still_in_flight" in result.details else
                                          "interrupted" if result.outcome == "interrupted" else "failed")
        self._write(state, result.details.get("still_in_flight", 0 if result.ok else None), result.message)


def spawn_detached(settings: Settings, store: Store, target: Target, plan: DrainPlan, actor: str,
                   log_dir: Path) -> str:
    """Start a drain in its own process and session; returns its id for the page to follow.

    The intent audit row (which names the target, the plan and the operator) is written here,
    before the process starts, and the process reads them back by id: nothing the user typed is
    on its command line, and a drain that never starts still has its announcement audited."""
    params = {"then": plan.then, "timeout_s": plan.timeout_s, "stay_until": plan.stay_until}
    drain_id = begin(store, "drain", target, actor, "dashboard", params)
    DrainTracker(store, drain_id, actor, target, plan.then)._write("starting", None, "process starting")
    cmd = [sys.executable, "-m", "jetwatch.cli", "drain", "--drain-id", drain_id]
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / f"drain-{drain_id}.log", "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=child_env(settings, NATS_SECRETS), start_new_session=True)
    # Collected when it ends, so a finished drain never stays a zombie under the dashboard.
    threading.Thread(target=proc.wait, name=f"drain-{drain_id}-reaper", daemon=True).start()
    return drain_id


def drains_for(store: Store, stream: str, consumer: str) -> pd.DataFrame:
    return store.query("drains_for_consumer", {"stream": stream, "consumer": consumer})
