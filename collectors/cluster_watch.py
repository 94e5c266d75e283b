"""What the collector does while the cluster shows it cannot serve a consumer, before the verdict
is named: it says so in the log at once, and it judges again as soon as the verdict falls due.

A cluster verdict waits `--no-leader-after` (a leader election is no incident). Sampling on the
interval alone, the cycle that names it could end up to a whole interval (and the cycle's own
length, a listing that waits out the server's gather) after it fell due; so the cycle that
judges it is started early enough to end just after then.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections import defaultdict
from collections.abc import Callable

from jetwatch.collectors.judging import ClusterShown

log = logging.getLogger("jetwatch.collector")

# A cycle started early ends this long after the verdict falls due, not before it: the judging's
# clock and the schedule's differ by the time the store write takes.
AFTER_DUE_S = 0.5
# Never two cycles closer than this, whatever falls due.
MIN_GAP_S = 1.0


def say_shown(shown: list[ClusterShown]) -> None:
    """One warning per stream and verdict for the consumers the cluster first showed it cannot
    serve: what was seen, and when they are named if it lasts."""
    groups: dict[tuple[str, str, str, str, int], list[str]] = defaultdict(list)
    for s in shown:
        account, stream, consumer = s.key
        groups[(account, stream, s.evidence.verdict, s.evidence.seen, round(s.due))].append(consumer)
    for (account, stream, verdict, seen, due), consumers in groups.items():
        names = ", ".join(sorted(consumers)[:5]) + (f" and {len(consumers) - 5} more" if len(consumers) > 5 else "")
        at = dt.datetime.fromtimestamp(due, dt.UTC).strftime("%H:%M:%S UTC")
        log.warning("the cluster cannot serve %d consumer(s) of stream %s (%s) now: %s; named %s at %s if it lasts "
                    "(--no-leader-after)", len(consumers), stream, names, seen, verdict, at,
                    extra={"account": account, "stream": stream,
                           **({"consumer": consumers[0]} if len(consumers) == 1 else {})})


class CycleSchedule:
    """When the next sampling cycle starts: an `interval` after the last one began, or earlier
    when a cluster verdict falls due before that cycle would be judged. Told what each judged
    cycle left due (`judged`), and woken by it while waiting."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.clock = clock
        self._due: float | None = None  # monotonic time the earliest pending cluster verdict falls due
        self._lead = 0.0  # how long the latest cycle took from its start to its verdicts
        self._changed = asyncio.Event()

    def judged(self, due_epoch: float | None, now_epoch: float, took: float) -> None:
        """A cycle was judged at `now_epoch` (the judging's clock), `took` seconds after it began;
        `due_epoch` (same clock) is when the earliest cluster verdict it left pending falls due."""
        self._lead = took
        self._due = None if due_epoch is None else self.clock() + (due_epoch - now_epoch)
        self._changed.set()

    def began(self, at: float) -> None:
        """A cycle began at `at` (monotonic). The one started for what falls due uses it up: if it
        judges nothing (its sampling or its write failed), the next starts on the interval again,
        never a second apart for as long as nothing is judged."""
        if self._due is not None and at >= self._early(self._due) - 0.05:
            self._due = None

    def _early(self, due: float) -> float:
        return due - self._lead + AFTER_DUE_S

    def next_start(self, began: float) -> float:
        """The monotonic time the cycle after the one that began at `began` starts."""
        start = began + self.interval
        if self._due is not None:
            start = min(start, max(began + MIN_GAP_S, self._early(self._due)))
        return start

    async def wait(self, began: float, stop: asyncio.Event) -> None:
        """Until the next cycle starts or `stop` is set, following what cycles judged meanwhile."""
        while not stop.is_set():
            self._changed.clear()
            remaining = self.next_start(began) - self.clock()
            if remaining <= 0:
                return
            stopping = asyncio.ensure_future(stop.wait())
            changed = asyncio.ensure_future(self._changed.wait())
            try:
                done, _ = await asyncio.wait((stopping, changed), timeout=remaining,
                                             return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopping.cancel()
                changed.cancel()
            if changed not in done:  # the time came, or the run stops
                return
