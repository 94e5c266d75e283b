"""Between a cluster failure's first sign and its verdict: the collector says it in the log at
once, and the cycle that names it starts early enough to end just after it falls due, not up to
a whole interval later."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from jetwatch.collectors.cluster_watch import AFTER_DUE_S, MIN_GAP_S, CycleSchedule, say_shown
from jetwatch.collectors.judging import ClusterShown
from jetwatch.health.cluster import NO_LEADER, Evidence


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("due_in,lead,expected", [
    (None, 4.0, 5.0),  # nothing due: the interval
    (30.0, 4.0, 5.0),  # due after the next cycle anyway
    (3.0, 1.0, 3.0 - 1.0 + AFTER_DUE_S),  # due before: start so the cycle ends just after
    (0.2, 4.0, MIN_GAP_S),  # due now: the next cycle, though not at once
])
def test_the_next_cycle_starts_on_the_interval_or_early_enough_to_judge_what_falls_due(due_in, lead, expected):
    clock = Clock()
    schedule = CycleSchedule(interval=5.0, clock=clock)
    schedule.judged(None if due_in is None else 1000.0 + due_in, now_epoch=1000.0, took=lead)
    assert schedule.next_start(clock.now) - clock.now == pytest.approx(expected)


def test_a_cycle_started_for_what_falls_due_is_the_only_early_one_even_if_it_judges_nothing():
    """Its sampling failed, nothing was judged: the schedule is back on the interval, not a cycle a
    second for as long as nothing is judged."""
    clock = Clock()
    schedule = CycleSchedule(interval=10.0, clock=clock)
    schedule.judged(1000.0 + 3.0, now_epoch=1000.0, took=1.0)
    starts, began = [], clock.now
    for _ in range(4):
        began = schedule.next_start(began)
        schedule.began(began)  # no judged(): every cycle fails
        starts.append(round(began - 100.0, 2))
    assert starts == [3.0 - 1.0 + AFTER_DUE_S, 12.5, 22.5, 32.5]


def test_a_verdict_falling_due_wakes_the_cycle_that_waits_on_the_interval():
    async def run() -> float:
        schedule, stop = CycleSchedule(interval=60.0), asyncio.Event()  # the real clock: a real wait
        began = time.monotonic()
        waiting = asyncio.create_task(schedule.wait(began, stop))
        await asyncio.sleep(0)  # waiting on the interval
        schedule.judged(2000.0 + 1.0, now_epoch=2000.0, took=0.5)
        await asyncio.wait_for(waiting, 30)
        return time.monotonic() - began

    assert asyncio.run(run()) < 60.0 / 2


def test_the_first_sign_is_said_once_a_stream_with_when_it_is_named(caplog):
    seen = "CONSUMER.LIST names it under missing (no server that leads it answered)"
    shown = [ClusterShown(("A", "CQ", c), Evidence(NO_LEADER, seen), 1_800_000_000.0) for c in ("idle", "busy")]
    with caplog.at_level(logging.WARNING, logger="jetwatch.collector"):
        say_shown(shown)
    assert [r.getMessage() for r in caplog.records] == [
        f"the cluster cannot serve 2 consumer(s) of stream CQ (busy, idle) now: {seen}; named NO_LEADER at "
        "08:00:00 UTC if it lasts (--no-leader-after)"]
