"""The collector's error as its status shows it (`collector_status.last_error`, the sidebar, `jetwatch
status`): when an error becomes the news, and when a clean cycle clears it.

An error is reported from anywhere (a cycle's sampling, the advisory loop, sealing, a post to
Alertmanager) and stays the news until a cycle that saw no error is in the store: until then the
error that kept the last cycles out (a locked file, a full disk) is still what the status must say.

    event                 what it does
    report(msg)           msg is the error; it is fresh (not yet said by a status written)
    settle(cycle_errors)  a cycle was sampled: its errors, if any, are reported as one; the cycle is
                          clean if it had none and nothing was reported since the last status; the
                          fresh error goes into this cycle's status, so it is fresh no more
    said()                a status that says the fresh error was written apart from a cycle
    cycle_written()       the cycle is in the store: a clean cycle, with nothing fresh since, clears it
    shown()               what the status says now: the error, or nothing after a clean cycle
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

log = logging.getLogger("jetwatch.collector")


class ErrorState:
    def __init__(self, clock: Callable[[], dt.datetime]) -> None:
        self.clock = clock
        self.last: tuple[str, dt.datetime] | None = None  # the error and when it was reported
        self.fresh = False  # reported since the last status written: not cleared yet
        self.clean = False  # the latest cycle saw no error (its status shows none)

    def report(self, message: str) -> None:
        log.error("%s", message)
        self.last = (message, self.clock())
        self.fresh = True
        self.clean = False

    def settle(self, cycle_errors: list[str]) -> None:
        if cycle_errors:
            self.report("; ".join(cycle_errors))
        self.clean = not cycle_errors and not self.fresh
        self.fresh = False

    def said(self) -> None:
        self.fresh = False

    def cycle_written(self) -> None:
        if self.clean and not self.fresh:
            self.last = None

    def shown(self) -> tuple[str | None, dt.datetime | None]:
        if self.clean or not self.last:
            return None, None
        return self.last
