"""What the collector hands the exporters after each judged cycle: the consumers with their verdicts,
and the counters it keeps since it started (pins, unpins, drops, pin moves by cause, cycle durations).

The collector counts the advisories it stores into these and hands a copy with each cycle; the
exporters read only this (never the store, never the NATS connection), so data flows one way:
collectors -> store -> health -> exporters.
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from jetwatch.core.advisory_row import AdvisoryRow
from jetwatch.core.pin_announce import HolderKey
from jetwatch.core.settings import DEFAULT_CLUSTER
from jetwatch.health import drops
from jetwatch.health.pin_causes import CAUSES as MOVE_CAUSES

DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


# The reasons the server gives an unpin. The reason label takes these or "other": advisories come
# from whoever may publish on their subjects, and each new label value would be a series for ever.
UNPIN_REASONS = ("admin", "timeout")


def unpin_reason(reason: object) -> str:
    """The `reason` label of an unpin: a known reason, else "other"."""
    return reason if reason in UNPIN_REASONS else "other"


@dataclass
class PinCounts:
    """Pins and unpins seen in the captured advisories: per consumer, and for the whole fleet
    (counters since start). The fleet totals are kept apart so that forgetting consumers no longer
    sampled (`keep_only`: forged names would otherwise grow the map for ever) never lowers them."""

    switches: Counter = field(default_factory=Counter)
    unpins: Counter = field(default_factory=Counter)
    fleet_switches: int = 0
    fleet_unpins: Counter = field(default_factory=Counter)  # by reason

    def add(self, rows: Sequence[AdvisoryRow]) -> None:
        for r in rows:
            key = (r["account"] or "", r["stream"] or "", r["consumer"] or "", r["group_name"] or "")
            if r["kind"] == "consumer_group_pinned":
                self.switches[key] += 1
                self.fleet_switches += 1
            elif r["kind"] == "consumer_group_unpinned":
                reason = unpin_reason(r["reason"])
                self.unpins[(*key, reason)] += 1
                self.fleet_unpins[reason] += 1

    def keep_only(self, consumers: set[tuple[str, str, str]]) -> None:
        """Forget the per-consumer counts of consumers not in `consumers` (account, stream, consumer)."""
        self.switches = Counter({k: n for k, n in self.switches.items() if k[:3] in consumers})
        self.unpins = Counter({k: n for k, n in self.unpins.items() if k[:3] in consumers})

    def copy(self) -> PinCounts:
        return PinCounts(self.switches.copy(), self.unpins.copy(), self.fleet_switches, self.fleet_unpins.copy())


# The advisory kinds that drop a message. The reason label is its cause (health/drops.py):
# max_deliver, terminated by a client, or removed from the stream while owed; a termination's own
# reason is free text and stays out of the labels.
DROP_KINDS = ("max_deliver", "terminated")


@dataclass
class DropCounts:
    """Dropped messages seen in the captured advisories, per consumer and reason and for the whole
    fleet (counters since start; the fleet totals survive `keep_only`, as PinCounts' do)."""

    by_consumer: Counter = field(default_factory=Counter)  # (account, stream, consumer, reason)
    fleet: Counter = field(default_factory=Counter)  # by reason

    def add(self, rows: Sequence[AdvisoryRow]) -> None:
        for r in rows:
            if r["kind"] in DROP_KINDS and r["stream"] and r["consumer"]:
                reason = drops.cause(r["kind"], r.get("reason"))
                self.by_consumer[(r["account"] or "", r["stream"], r["consumer"], reason)] += 1
                self.fleet[reason] += 1

    def keep_only(self, consumers: set[tuple[str, str, str]]) -> None:
        self.by_consumer = Counter({k: n for k, n in self.by_consumer.items() if k[:3] in consumers})

    def copy(self) -> DropCounts:
        return DropCounts(self.by_consumer.copy(), self.fleet.copy())


@dataclass
class MoveCounts:
    """Pin switches by cause (health/pin_causes.py), counted once each when its cause is settled:
    per consumer and for the whole fleet (the fleet totals survive `keep_only`, as PinCounts' do).
    `counted` remembers the moves of the recent past already counted, by their identity."""

    by_consumer: Counter = field(default_factory=Counter)  # (account, stream, consumer, group, cause)
    fleet: Counter = field(default_factory=Counter)  # by cause
    counted: dict[tuple[Any, ...], dt.datetime] = field(default_factory=dict)

    def add(self, moves: pd.DataFrame, forget_before: dt.datetime) -> int:
        """Count the moves not counted yet; forget identities older than `forget_before`."""
        new = 0
        for r in moves.itertuples(index=False):
            ts = pd.Timestamp(r.ts).to_pydatetime()
            key = (r.account, r.stream, r.consumer, ts, r.source)
            if key in self.counted:
                continue
            self.counted[key] = ts
            cause = r.cause if r.cause in MOVE_CAUSES else "unknown"
            group = r.group_name if isinstance(r.group_name, str) else ""
            self.by_consumer[(r.account or "", r.stream or "", r.consumer or "", group, cause)] += 1
            self.fleet[cause] += 1
            new += 1
        self.counted = {k: t for k, t in self.counted.items() if t >= forget_before}
        return new

    def keep_only(self, consumers: set[tuple[str, str, str]]) -> None:
        self.by_consumer = Counter({k: n for k, n in self.by_consumer.items() if k[:3] in consumers})

    def copy(self) -> MoveCounts:
        return MoveCounts(self.by_consumer.copy(), self.fleet.copy(), dict(self.counted))


@dataclass
class Snapshot:
    """What one cycle exports: every consumer with state, limits and verdict; collector health."""

    at: dt.datetime
    consumers: pd.DataFrame
    pins: PinCounts
    cycle_buckets: list[int]
    cycle_sum: float
    cycles: int
    capture_backlog: int | None
    rejects: int
    capture_gaps: int = 0
    last_capture_gap_at: dt.datetime | None = None
    holders: dict[HolderKey, tuple[str, str]] = field(default_factory=dict)  # holder_key -> (announced name, verification)
    drops: DropCounts = field(default_factory=DropCounts)
    moves: MoveCounts = field(default_factory=MoveCounts)
    holder_pulls: int = 1
    cluster: str = DEFAULT_CLUSTER  # the collector's --cluster: the cluster whose freshness it exports


class CycleHistogram:
    """Cycle durations, bucketed as Prometheus histograms are (cumulative at render)."""

    def __init__(self) -> None:
        self.counts = [0] * (len(DURATION_BUCKETS) + 1)
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(DURATION_BUCKETS, seconds)] += 1
        self.total += seconds
