"""What the collector's /healthz and /readyz answer, for a scheduler that restarts what is stuck
and routes to what works.

Liveness asks only whether the collector's event loop still turns: a NATS outage or a store held
by another process is what jetwatch must report, and a restart would fix neither (it would turn
the outage into a restart loop and lose the verdicts that name it). Readiness asks whether the
collector does its job: a sampling cycle ended lately and the store took a write lately. A cycle
whose sampling failed because NATS is down still ends and still writes its status, so a NATS
outage leaves the collector ready and /metrics served: the outage is what the metrics show.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

# The event loop turns once a second (`beat`); a loop that has not for this long is stuck.
LIVE_WITHIN_S = 30.0


@dataclass
class Probe:
    """One probe's answer: whether it passes, and why, in words for whoever reads the probe."""

    ok: bool
    text: str


class Probes:
    """Times (monotonic) the collector reports as it works; each probe reads them when asked, from
    the HTTP server's thread (single attribute writes and reads: no lock needed)."""

    def __init__(self, interval_s: float, request_timeout_s: float, lock_timeout_s: float) -> None:
        # Not ready once no cycle ended, or no write got into the store, for this long: three
        # cycles, one whose requests each waited out their timeout (a server that does not answer
        # is what the cycle reports, not a stuck collector), and a write that waited out the lock.
        self.interval_s = interval_s
        self.stale_after_s = 3 * interval_s + 2 * request_timeout_s + lock_timeout_s
        self.started = time.monotonic()
        self.loop_at = self.started
        self.stage = "starting"  # what the collector does before its first cycle
        self.cycle_at: float | None = None
        self.stored_at: float | None = None
        self.store_error: str | None = None  # the latest write's failure, until a write succeeds

    async def beat(self) -> None:
        """Mark the event loop as turning, once a second, until cancelled."""
        while True:
            self.loop_at = time.monotonic()
            await asyncio.sleep(1.0)

    def cycle_ended(self) -> None:
        self.cycle_at = time.monotonic()

    def stored(self) -> None:
        self.stored_at, self.store_error = time.monotonic(), None

    def store_failed(self, error: str) -> None:
        self.store_error = error

    def live(self) -> Probe:
        quiet = time.monotonic() - self.loop_at
        if quiet > LIVE_WITHIN_S:
            return Probe(False, f"the collector's event loop has not turned for {quiet:.0f} s: it is stuck; "
                                "restart it")
        return Probe(True, "the collector runs")

    def ready(self) -> Probe:
        now = time.monotonic()
        if self.cycle_at is None:
            return Probe(False, f"no cycle yet ({self.stage}, for {now - self.started:.0f} s)")
        since_cycle = now - self.cycle_at
        if since_cycle > self.stale_after_s:
            return Probe(False, f"no sampling cycle ended for {since_cycle:.0f} s (one is due every "
                                f"{self.interval_s:g} s): sampling is stuck; the collector's log says where")
        since_write = now - (self.stored_at if self.stored_at is not None else self.started)
        if since_write > self.stale_after_s:
            why = f": {self.store_error}" if self.store_error else ""
            return Probe(False, f"nothing was written to the store for {since_write:.0f} s{why}")
        return Probe(True, f"the last cycle ended {since_cycle:.0f} s ago and the store takes writes")
