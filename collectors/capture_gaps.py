"""Gaps in the advisory record, found from the capture stream's own sequence numbers.

The capture stream numbers every advisory it keeps. The store remembers the last one it holds
(the cursor, written in the same transaction as the advisories), so a message that arrives
further on than the next one means the stream dropped some before the collector read them: its
size or age limit while the collector was stopped or behind, or a durable that was gone. A
stream whose creation time changed was deleted and recreated: everything it held past the
cursor, and whatever was sent while it did not exist, is lost. Each such jump is a gap row; pin
history between its two times is incomplete, and the pages say so.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from typing import Any

from jetwatch.core.clock import parse_rfc3339

DROPPED = "the capture stream's size or age limit dropped these advisories before the collector stored them"
DURABLE_GONE = ("the collector's durable on the capture stream was gone (it outlived its inactive threshold, "
                "or was deleted), and the stream's size or age limit dropped these advisories meanwhile")
RECREATED = ("the capture stream was deleted and recreated: the advisories it held after this sequence, and "
             "those sent while it did not exist, are lost")


@dataclass(frozen=True)
class Cursor:
    """The last capture-stream message the store holds (last_seq None: none yet)."""

    stream: str
    stream_created: str | None
    last_seq: int | None
    last_ts: dt.datetime | None


def gap(now: dt.datetime, stream: str, from_seq: int, to_seq: int | None, from_ts: dt.datetime | None,
        to_ts: dt.datetime | None, reason: str) -> dict[str, Any]:
    return {"detected_at": now, "stream": stream, "from_seq": from_seq, "to_seq": to_seq,
            "missed": None if to_seq is None else to_seq - from_seq + 1,
            "from_ts": from_ts, "to_ts": to_ts, "reason": reason}


class GapTracker:
    """Follows the capture stream's sequence; every step is pure (returns the new cursor),
    committed only once the store holds what it describes."""

    def __init__(self, cursor: Cursor):
        self.cursor = cursor

    def start_seq(self) -> int | None:
        """Where a new durable should start: right after what the store holds."""
        return self.cursor.last_seq + 1 if self.cursor.last_seq else None

    def on_stream(self, created: str | None, now: dt.datetime) -> tuple[list[dict[str, Any]], Cursor]:
        """The stream as just opened: a new incarnation loses what the old one held past the cursor."""
        c = self.cursor
        if c.stream_created is None or created == c.stream_created:
            return [], replace(c, stream_created=created)
        lost = []
        if c.last_seq is not None:
            at = _time(created) or now
            lost = [gap(now, c.stream, c.last_seq + 1, None, c.last_ts, at, RECREATED)]
        return lost, Cursor(c.stream, created, 0 if c.last_seq is not None else None, c.last_ts)

    def observe(self, positions: list[tuple[int, dt.datetime]], now: dt.datetime,
                reason: str) -> tuple[list[dict[str, Any]], Cursor]:
        """The gaps a fetched batch reveals, and the cursor after it. Redelivered messages
        (at or before the cursor) move nothing."""
        c, gaps = self.cursor, []
        last_seq, last_ts = c.last_seq, c.last_ts
        for seq, ts in sorted(positions):
            if last_seq is not None and seq > last_seq + 1:
                gaps.append(gap(now, c.stream, last_seq + 1, seq - 1, last_ts, ts, reason))
            if last_seq is None or seq > last_seq:
                last_seq, last_ts = seq, ts
        return gaps, replace(c, last_seq=last_seq, last_ts=last_ts)

    def commit(self, cursor: Cursor) -> None:
        self.cursor = cursor


def _time(text: str | None) -> dt.datetime | None:
    try:
        return parse_rfc3339(text)
    except ValueError:
        return None
