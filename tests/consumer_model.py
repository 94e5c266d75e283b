"""A small model of one pull consumer on a JetStream server, sampled as jetwatch samples it.

It keeps what the server keeps (published messages with their times, the next message to
deliver, the messages in flight with their delivery counts, the ack floor, the last delivery and
acknowledgement times, the waiting pulls) and applies what clients do each step: publish, pull and
take deliveries, acknowledge, report progress, let ack_wait pass. The real server, with real
clients, is tests/test_incidents.py; this model lets the rules be specified over many minutes of
behaviour in milliseconds.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

T0 = dt.datetime(2026, 11, 27, 3, 0, tzinfo=dt.UTC)
STEP = 5.0  # seconds between samples: the collector's default interval


@dataclass
class Step:
    """What clients do during one step (all at its middle)."""

    publish: int = 0
    deliver: int = 0  # messages the pulls take this step (new ones, after redeliveries due)
    ack: int | str = 0  # oldest in-flight messages acknowledged, or "all"
    drop: int | str = 0  # oldest in-flight messages naked until max_deliver drops them, or "all"
    waiting: int = 0  # pull requests waiting at the sample
    progress: bool = False  # +WPI on every message in flight
    paused: bool = False
    pin: str | None = None


@dataclass
class Model:
    ack_wait: float = 30.0
    published: list[float] = field(default_factory=list)  # publish time by stream sequence - 1
    next_seq: int = 1
    in_flight: dict[int, list[float]] = field(default_factory=dict)  # seq -> [timer start, deliveries]
    acked: set[int] = field(default_factory=set)
    floor: int = 0
    dcs: int = 0
    last_delivery: float | None = None
    last_ack: float | None = None

    def _deliver(self, seq: int, at: float) -> None:
        self.dcs += 1
        timer = self.in_flight.setdefault(seq, [at, 0])
        timer[0], timer[1] = at, timer[1] + 1
        self.last_delivery = at

    def step(self, t: float, s: Step) -> None:
        at = t - STEP / 2
        self.published += [at] * s.publish
        due = [q for q, (start, _) in sorted(self.in_flight.items()) if at - start >= self.ack_wait]
        budget = s.deliver
        for seq in due[:budget]:  # the server redelivers what outlived ack_wait first
            self._deliver(seq, at)
        budget -= min(budget, len(due))
        while budget and self.next_seq <= len(self.published):
            self._deliver(self.next_seq, at)
            self.next_seq += 1
            budget -= 1
        if s.progress and self.in_flight:
            for timer in self.in_flight.values():
                timer[0] = at
            self.last_delivery = at  # a progress report is delivered activity to the server
        n = len(self.in_flight) if s.ack == "all" else int(s.ack)
        for seq in sorted(self.in_flight)[:n]:
            del self.in_flight[seq]
            self.acked.add(seq)
            self.last_ack = at
        # A message dropped at max_deliver leaves the pending set and moves the ack floor, but the
        # server's ack_floor.last_active stays: nothing acknowledged it.
        n = len(self.in_flight) if s.drop == "all" else int(s.drop)
        for seq in sorted(self.in_flight)[:n]:
            del self.in_flight[seq]
            self.acked.add(seq)
            self.last_delivery = at
        while self.floor + 1 in self.acked:
            self.floor += 1

    def sample(self, t: float, s: Step) -> dict:
        unacked = self.floor + 1 if self.floor < len(self.published) else None
        stamp = lambda x: None if x is None else (T0 + dt.timedelta(seconds=x)).isoformat()  # noqa: E731
        return {
            "ts": T0 + dt.timedelta(seconds=t), "created": T0 - dt.timedelta(days=1),
            "num_pending": len(self.published) - self.next_seq + 1, "num_ack_pending": len(self.in_flight),
            "num_waiting": s.waiting, "num_redelivered": sum(1 for _, n in self.in_flight.values() if n > 1),
            "delivered_consumer_seq": self.dcs, "delivered_stream_seq": self.next_seq - 1,
            "ack_floor_stream_seq": self.floor, "delivered_last_active": stamp(self.last_delivery),
            "ack_floor_last_active": stamp(self.last_ack), "paused": s.paused, "pinned_id": s.pin,
            "oldest_unacked_age_seconds": None if unacked is None else t - self.published[unacked - 1],
        }


def run(behaviour: Callable[[int], Step], steps: int, ack_wait: float = 30.0,
        consumer: str = "C") -> pd.DataFrame:
    """`steps` samples of a consumer whose clients do `behaviour(i)` in step i."""
    model, rows = Model(ack_wait=ack_wait), []
    for i in range(1, steps + 1):
        t = i * STEP
        s = behaviour(i)
        model.step(t, s)
        rows.append({"account": "A", "stream": "S", "consumer": consumer, **model.sample(t, s)})
    return pd.DataFrame(rows)
