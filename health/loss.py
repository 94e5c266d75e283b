"""Time to data loss: how long until a stream's limits remove a consumer's oldest unprocessed
message before the consumer has acknowledged it.

A stream with `discard: old` makes room by removing its oldest messages: when `max_age` passes, or
when a new message would exceed `max_msgs` or `max_bytes`. A consumer whose ack floor is behind
that front loses what the front passes over: the messages are gone, never processed, and no
advisory says so. With the stream's arrival rate R and the rate F at which the consumer's ack
floor moves through the stream's sequences (both per second):

- `max_age`: the oldest unacknowledged message is A seconds old; the message at the floor gets
  older at 1 - F/R seconds a second (a floor that keeps pace with arrivals keeps its age), so
  it is removed after (max_age - A) / (1 - F/R).
- `max_msgs` (and `max_bytes`, in messages of the stream's mean size): `room` messages fit before
  the stream is full, and `ahead` messages come before the floor's; from then on every arrival
  removes one from the front, which reaches the floor after (room + ahead) / (R - F).

The least of these, where the consumer does not keep up (F < R); none where nothing is
unacknowledged, the stream discards new messages instead (publishers are refused: nothing is
lost from the stream), or the rates are not known yet. Work-queue and interest streams remove
acknowledged messages as well, which `messages`/`bytes` already show: the same projection holds.
`max_msgs_per_subject` is not projected (its front is per subject).

A stream with `discard: new` loses nothing: it refuses what would exceed `max_msgs` or
`max_bytes`. Once full, every publish fails while its consumers look idle, which no consumer
number shows: `room_before_refused` says how many messages still fit.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StreamLimits:
    """A stream's limits and state, as STREAM.INFO gives them (0: no limit)."""

    discard: str = "old"
    max_age: float = 0.0  # seconds
    max_msgs: int = 0
    max_bytes: int = 0
    messages: int = 0
    bytes: int = 0
    first_seq: int = 0
    last_seq: int = 0


@dataclass(frozen=True)
class Loss:
    """A projected loss: in how many seconds (0: already), and by which limit (`max_age`,
    `max_msgs`, `max_bytes`; for a loss already made, the limits the stream has, joined by "or",
    since what removed a message is not told after the fact)."""

    seconds: float
    limit: str


def projected_loss(limits: StreamLimits, floor: int, oldest_age: float | None, arrivals: float | None,
                   floor_rate: float | None) -> Loss | None:
    """When and by which limit the stream removes the consumer's oldest unacknowledged message
    (stream sequence `floor` + 1, `oldest_age` seconds old), at the stream's arrival rate and the
    floor's rate (stream sequences a second); None when no loss is in sight (or the rates are
    not known)."""
    oldest = floor + 1
    if limits.discard != "old" or oldest > limits.last_seq:
        return None
    if limits.first_seq > oldest:  # the front has passed the floor already: messages were removed unprocessed
        return Loss(0.0, " or ".join(n for n, v in (("max_age", limits.max_age), ("max_msgs", limits.max_msgs),
                                                     ("max_bytes", limits.max_bytes)) if v > 0) or "limits")
    if arrivals is None or floor_rate is None:
        return None
    found = [loss for loss in (_by_age(limits, oldest_age, arrivals, floor_rate),
                               _by_count(limits, oldest, arrivals, floor_rate)) if loss is not None]
    return min(found, key=lambda loss: loss.seconds) if found else None


def time_to_loss(limits: StreamLimits, floor: int, oldest_age: float | None, arrivals: float | None,
                 floor_rate: float | None) -> float | None:
    """Seconds until the stream's limits remove the consumer's oldest unacknowledged message;
    0 when they already have; None when no loss is in sight (`projected_loss`)."""
    loss = projected_loss(limits, floor, oldest_age, arrivals, floor_rate)
    return None if loss is None else loss.seconds


def _by_age(limits: StreamLimits, oldest_age: float | None, arrivals: float, floor_rate: float) -> Loss | None:
    if limits.max_age <= 0 or oldest_age is None:
        return None
    if arrivals <= 0:  # nothing arrives: the floor's message ages with the clock unless the floor moves
        return Loss(max(0.0, limits.max_age - oldest_age), "max_age") if floor_rate <= 0 else None
    growth = 1.0 - floor_rate / arrivals
    if growth <= 0:
        return None
    return Loss(max(0.0, limits.max_age - oldest_age) / growth, "max_age")


def _by_count(limits: StreamLimits, oldest: int, arrivals: float, floor_rate: float) -> Loss | None:
    if arrivals <= floor_rate:
        return None
    rooms: list[tuple[float, str]] = []
    if limits.max_msgs > 0:
        rooms.append((limits.max_msgs - limits.messages, "max_msgs"))
    if limits.max_bytes > 0 and limits.messages > 0 and limits.bytes > 0:
        rooms.append(((limits.max_bytes - limits.bytes) / (limits.bytes / limits.messages), "max_bytes"))
    if not rooms:
        return None
    room, limit = min(rooms)
    ahead = max(0, oldest - limits.first_seq)
    return Loss(max(0.0, room + ahead) / (arrivals - floor_rate), limit)


def room_before_refused(limits: StreamLimits) -> float | None:
    """Messages a stream with `discard: new` still takes before it refuses publishes (a message
    that would exceed `max_msgs` or `max_bytes` is rejected, and the stream keeps what it has):
    under 1 when the next message does not fit; for `max_bytes` in messages of the stream's
    mean size. None where the stream discards old messages instead, has no count or size limit,
    or is empty under a size limit alone (no mean size yet, and not full). Publishers learn of
    it from their errors; a consumer of the stream only sees no new work."""
    if limits.discard != "new":
        return None
    rooms: list[float] = []
    if limits.max_msgs > 0:
        rooms.append(max(0, limits.max_msgs - limits.messages))
    if limits.max_bytes > 0:
        if limits.messages > 0 and limits.bytes > 0:
            rooms.append(max(0.0, (limits.max_bytes - limits.bytes) / (limits.bytes / limits.messages)))
        elif limits.bytes >= limits.max_bytes:
            rooms.append(0.0)
    return float(min(rooms)) if rooms else None
