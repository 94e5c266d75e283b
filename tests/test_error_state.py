"""The collector's error state (collectors/error_state.py), event by event: what the status says
after each sequence of reports, sampled cycles, statuses written and cycles stored."""

from __future__ import annotations

import datetime as dt

import pytest

from jetwatch.collectors.error_state import ErrorState

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _run(events: list[tuple[str, ...]]) -> ErrorState:
    """Each event: ("report", message), ("settle", *cycle_errors), ("said",) or ("written",);
    the clock moves a second each time it is read, so each report carries a time of its own."""
    ticks = iter(range(1000))
    state = ErrorState(lambda: T0 + dt.timedelta(seconds=next(ticks)))
    for name, *args in events:
        if name == "report":
            state.report(args[0])
        elif name == "settle":
            state.settle(list(args))
        elif name == "said":
            state.said()
        elif name == "written":
            state.cycle_written()
        else:
            raise AssertionError(f"no event {name}")
    return state


# (events, then: the error kept, fresh, clean, the error the status shows)
TRANSITIONS = [
    ([], None, False, False, None),
    # An error is the news at once, and fresh until a status says it.
    ([("report", "a")], "a", True, False, "a"),
    # The cycle after an error is not clean: its status carries the error, which is then said.
    ([("report", "a"), ("settle",)], "a", False, False, "a"),
    ([("report", "a"), ("settle",), ("written",)], "a", False, False, "a"),
    # The next cycle with no error is clean: its status shows none; once stored, the error is gone.
    ([("report", "a"), ("settle",), ("settle",)], "a", False, True, None),
    ([("report", "a"), ("settle",), ("settle",), ("written",)], None, False, True, None),
    # A clean cycle the store could not take yet clears nothing: the error stays the news until then.
    ([("report", "a"), ("settle",), ("settle",), ("report", "locked")], "locked", True, False, "locked"),
    ([("report", "a"), ("settle",), ("settle",), ("report", "locked"), ("written",)], "locked", True, False, "locked"),
    # A cycle's own errors are reported as one, and the cycle is not clean.
    ([("settle", "x", "y")], "x; y", False, False, "x; y"),
    ([("settle", "x"), ("written",)], "x", False, False, "x"),
    # A failed cycle's status said the error: the next cycle with no error is clean.
    ([("report", "a"), ("said",)], "a", False, False, "a"),
    ([("report", "a"), ("said",), ("settle",), ("written",)], None, False, True, None),
    # An error reported after a clean cycle makes it unclean again, whatever was shown.
    ([("settle",), ("report", "b")], "b", True, False, "b"),
    ([("settle",), ("written",), ("report", "b"), ("written",)], "b", True, False, "b"),
    # No error at all: clean from the first cycle, nothing shown.
    ([("settle",), ("written",)], None, False, True, None),
]


@pytest.mark.parametrize("events, last, fresh, clean, shown", TRANSITIONS,
                         ids=[" ".join("+".join(e) for e in t[0]) or "new" for t in TRANSITIONS])
def test_the_error_state_moves_as_the_table_says(events, last, fresh, clean, shown):
    state = _run(events)
    assert (state.last[0] if state.last else None, state.fresh, state.clean) == (last, fresh, clean)
    assert state.shown()[0] == shown
    assert (state.shown()[1] is None) == (shown is None)


def test_an_error_carries_the_time_it_was_reported_and_a_later_one_replaces_it():
    state = _run([("report", "a"), ("settle",), ("report", "b")])
    assert state.last == ("b", T0 + dt.timedelta(seconds=1))
    assert state.shown() == ("b", T0 + dt.timedelta(seconds=1))
