"""Gaps in the advisory record, found from the capture stream's own sequence numbers.

The capture stream numbers every advisory it keeps. The store remembers the last one it holds
(the cursor, written in the same transaction as the advisories). A message that arrives further
on than the next one skips some sequences, but skipped is not lost: a durable hands out new
messages before it redelivers those a stopped (or failing) collector fetched and never
acknowledged. So a skipped sequence is lost only once the stream no longer holds it (below its
first sequence: its size or age limit removed it unread, or a durable that was gone missed it);
until then it is awaited, kept with the cursor, and an arrival settles it. A stream whose
creation time changed was deleted and recreated: everything it held past the cursor, and
whatever was sent while it did not exist, is lost. Each loss is a gap row; pin history between
its two times is incomplete, and the pages say so.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, replace
from typing import Any

from jetwatch.core.clock import parse_rfc3339, rfc3339

DROPPED = "the capture stream's size or age limit dropped these advisories before the collector stored them"
DURABLE_GONE = ("the collector's durable on the capture stream was gone (it outlived its inactive threshold, "
                "or was deleted), and the stream's size or age limit dropped these advisories meanwhile")
RECREATED = ("the capture stream was deleted and recreated: the advisories it held after this sequence, and "
             "those sent while it did not exist, are lost")


@dataclass(frozen=True)
class Skipped:
    """Sequences from_seq..to_seq, skipped between the stored messages of from_ts and to_ts."""

    from_seq: int
    to_seq: int
    from_ts: dt.datetime | None
    to_ts: dt.datetime | None


@dataclass(frozen=True)
class Cursor:
    """The last capture-stream message the store holds (last_seq None: none yet), and the
    sequences before it that were skipped while the stream still held them (`awaiting`)."""

    stream: str
    stream_created: str | None
    last_seq: int | None
    last_ts: dt.datetime | None
    awaiting: tuple[Skipped, ...] = ()


def awaiting_json(awaiting: tuple[Skipped, ...]) -> str | None:
    """`awaiting` as the store keeps it (None when nothing is awaited)."""
    if not awaiting:
        return None
    return json.dumps([[a.from_seq, a.to_seq, a.from_ts and rfc3339(a.from_ts), a.to_ts and rfc3339(a.to_ts)]
                       for a in awaiting])


def awaiting_of(text: str | None) -> tuple[Skipped, ...]:
    """What `awaiting_json` wrote, read back."""
    if not text:
        return ()
    return tuple(Skipped(int(f), int(t), _time(a), _time(b)) for f, t, a, b in json.loads(text))


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
        lost = [gap(now, c.stream, a.from_seq, a.to_seq, a.from_ts, a.to_ts, RECREATED) for a in c.awaiting]
        if c.last_seq is not None:
            at = _time(created) or now
            lost.append(gap(now, c.stream, c.last_seq + 1, None, c.last_ts, at, RECREATED))
        return lost, Cursor(c.stream, created, 0 if c.last_seq is not None else None, c.last_ts)

    def skips(self, positions: list[tuple[int, dt.datetime]]) -> bool:
        """Whether a fetched batch skips a sequence, or sequences are awaited: then the stream's
        first sequence is needed to tell what is lost."""
        last = self.cursor.last_seq
        for seq, _ in sorted(positions):
            if last is not None and seq > last + 1:
                return True
            last = seq if last is None else max(last, seq)
        return bool(self.cursor.awaiting)

    def observe(self, positions: list[tuple[int, dt.datetime]], now: dt.datetime, reason: str,
                first_seq: int | None = None) -> tuple[list[dict[str, Any]], Cursor]:
        """The gaps a fetched batch reveals, and the cursor after it. A skipped sequence is
        awaited while the stream holds it (at or past `first_seq`; None: not known, so all of
        it); an awaited one that arrives is settled; what the stream no longer holds is a gap."""
        c = self.cursor
        last_seq, last_ts = c.last_seq, c.last_ts
        awaiting = list(c.awaiting)
        for seq, ts in sorted(positions):
            if last_seq is not None and seq > last_seq + 1:
                awaiting.append(Skipped(last_seq + 1, seq - 1, last_ts, ts))
            if last_seq is None or seq > last_seq:
                last_seq, last_ts = seq, ts
            else:
                awaiting = _settle(awaiting, seq, ts)
        gaps = [gap(now, c.stream, a.from_seq, min(a.to_seq, first_seq - 1), a.from_ts, a.to_ts, reason)
                for a in awaiting if first_seq is not None and a.from_seq < first_seq]
        held = tuple(a if first_seq is None or a.from_seq >= first_seq else replace(a, from_seq=first_seq)
                     for a in awaiting if first_seq is None or a.to_seq >= first_seq)
        return gaps, replace(c, last_seq=last_seq, last_ts=last_ts, awaiting=held)

    def commit(self, cursor: Cursor) -> None:
        self.cursor = cursor


def _settle(awaiting: list[Skipped], seq: int, ts: dt.datetime) -> list[Skipped]:
    """`awaiting` once sequence `seq` (stored at `ts`) has arrived."""
    out = []
    for a in awaiting:
        if not a.from_seq <= seq <= a.to_seq:
            out.append(a)
            continue
        if a.from_seq < seq:
            out.append(replace(a, to_seq=seq - 1, to_ts=ts))
        if seq < a.to_seq:
            out.append(replace(a, from_seq=seq + 1, from_ts=ts))
    return out


def _time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        return parse_rfc3339(text)
    except ValueError:
        return None
