"""The capture stream's sequence, followed: what is skipped is awaited while the stream holds it,
settled when it arrives, and a gap only once the stream has removed it unread."""

from __future__ import annotations

import datetime as dt

import pytest

from jetwatch.collectors.capture_gaps import DROPPED, Cursor, GapTracker, Skipped, awaiting_json, awaiting_of

T0 = dt.datetime(2026, 12, 7, 3, 0, tzinfo=dt.UTC)
NOW = T0 + dt.timedelta(hours=1)


def at(seq: int) -> tuple[int, dt.datetime]:
    """A message of the capture stream: its sequence, stored `seq` seconds after T0."""
    return seq, T0 + dt.timedelta(seconds=seq)


def follow(cursor: Cursor, batches: list[tuple[list[int], int | None]]) -> tuple[list[tuple[int, int]], Cursor]:
    """Every batch observed in turn (its sequences, and the stream's first sequence then): the gaps
    booked, as (from_seq, to_seq), and the cursor after the last."""
    tracker, booked = GapTracker(cursor), []
    for seqs, first in batches:
        gaps, after = tracker.observe([at(s) for s in seqs], NOW, DROPPED, first)
        tracker.commit(after)
        booked += [(g["from_seq"], g["to_seq"]) for g in gaps]
    return booked, tracker.cursor


STORED_TO_4 = Cursor("CAP", "created", 4, at(4)[1])

CASES = [
    # (what happened, batches, gaps booked, still awaited)
    ("in order: nothing skipped", [([5, 6, 7], 1)], [], []),
    ("a killed collector's batch comes back after newer ones", [([8, 9], 1), ([5, 6, 7], 1)], [], []),
    ("part of it comes back, the rest is awaited", [([8, 9], 1), ([5, 7], 1)], [], [(6, 6)]),
    ("the stream's limit removed the skipped ones: lost", [([8, 9], 8)], [(5, 7)], []),
    ("only what the stream no longer holds is lost", [([8, 9], 6)], [(5, 5)], [(6, 7)]),
    ("awaited, then removed unread by the limit: lost then", [([8, 9], 1), ([10], 9)], [(5, 7)], []),
    ("the stream could not be read: awaited, not lost", [([8, 9], None)], [], [(5, 7)]),
    ("redelivered before the cursor moves nothing", [([3, 4, 5], 1)], [], []),
]


@pytest.mark.parametrize("batches,booked,awaited", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_skipped_sequence_is_a_gap_only_once_the_stream_no_longer_holds_it(batches, booked, awaited):
    gaps, cursor = follow(STORED_TO_4, batches)
    assert gaps == booked
    assert [(a.from_seq, a.to_seq) for a in cursor.awaiting] == awaited
    assert cursor.last_seq == max([4] + [s for seqs, _ in batches for s in seqs])


def test_what_is_awaited_survives_a_restart_with_its_times():
    _, cursor = follow(STORED_TO_4, [([8, 9], 1), ([6], 1)])
    assert cursor.awaiting == (Skipped(5, 5, at(4)[1], at(6)[1]), Skipped(7, 7, at(6)[1], at(8)[1]))
    assert awaiting_of(awaiting_json(cursor.awaiting)) == cursor.awaiting
    assert awaiting_of(awaiting_json(())) == ()


def test_a_recreated_stream_loses_what_was_awaited_too():
    _, cursor = follow(STORED_TO_4, [([8, 9], 1)])
    lost, after = GapTracker(cursor).on_stream("recreated", NOW)
    assert [(g["from_seq"], g["to_seq"]) for g in lost] == [(5, 7), (10, None)]
    assert after.awaiting == () and after.last_seq == 0


def test_skips_asks_for_the_first_sequence_only_when_needed():
    assert not GapTracker(STORED_TO_4).skips([at(5), at(6)])
    assert GapTracker(STORED_TO_4).skips([at(5), at(7)])
    assert GapTracker(Cursor("CAP", None, None, None)).skips([at(5), at(7)])
    _, awaiting = follow(STORED_TO_4, [([8], 1)])
    assert GapTracker(awaiting).skips([at(9)])
