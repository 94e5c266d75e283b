"""Drains that outlive the page that started them: their state and progress live in the store.

A drain started from the dashboard runs as its own process (`jetwatch drain ... --drain-id`), in
its own session, so a rerun or a closed tab neither kills nor orphans it; the page reads its
progress back from the `drains` table.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from jetwatch import sql
from jetwatch.actions.audit import begin, finish
from jetwatch.actions.operations import ActionResult, DrainPlan, Target, utcnow
from jetwatch.core.children import NATS_SECRETS, child_env
from jetwatch.core.settings import Settings
from jetwatch.store.database import Store, StoreError

log = logging.getLogger("jetwatch.drains")


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
    on its command line, and a drain that never starts still has its announcement audited.
    The process is handed `store` itself as its --db: the dashboard may have been given it as
    --dbs, or as a directory, neither of which names the one file the intent is in."""
    params = {"then": plan.then, "timeout_s": plan.timeout_s, "stay_until": plan.stay_until}
    drain_id = begin(store, "drain", target, actor, "dashboard", params)
    tracker = DrainTracker(store, drain_id, actor, target, plan.then)
    tracker._write("starting", None, "process starting")
    cmd = [sys.executable, "-m", "jetwatch.cli", "drain", "--drain-id", drain_id]
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"drain-{drain_id}.log"
    child = settings.replace(db=str(store.path), dbs=())
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=child_env(child, NATS_SECRETS), start_new_session=True)
    # Collected when it ends, so a finished drain never stays a zombie under the dashboard.
    threading.Thread(target=_reap, args=(proc, tracker, params, log_path), name=f"drain-{drain_id}-reaper",
                     daemon=True).start()
    return drain_id


def _reap(proc: subprocess.Popen[bytes], tracker: DrainTracker, params: dict[str, Any], log_path: Path) -> None:
    """Wait for a drain's process. One that ended without auditing an outcome (it refused its
    settings, could not read the store, was killed) would leave its drain `starting` for ever: it
    gets a `failed` outcome and drain state here, with the last words of its log."""
    code = proc.wait()
    store, drain_id = tracker.store, tracker.drain_id
    try:
        if (store.query("audit_action", {"action_id": drain_id})["phase"] == "outcome").any():
            return
        said = last_line(log_path)
        result = ActionResult("drain", tracker.target, False,
                              f"the drain process ended before it finished (exit code {code})"
                              + (f": {said}" if said else "") + f". Its log: {log_path}", None, {"outcome": "failed"})
        finish(store, drain_id, result, tracker.actor, "dashboard", params)
        tracker.finish(result)
    except (StoreError, duckdb.Error) as exc:
        log.warning("drain %s ended (exit code %s) and its end could not be recorded: %s", drain_id, code, exc)


def last_line(path: Path, most: int = 500) -> str:
    """The last non-empty line of a log, at most `most` characters (its end: where an error says why)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 8192))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return lines[-1][-most:] if lines else ""


def drains_for(store: Store, stream: str, consumer: str) -> pd.DataFrame:
    return store.query("drains_for_consumer", {"stream": stream, "consumer": consumer})
