"""Cycles the store could not take yet, kept in order until a write succeeds.

A dashboard reader, a pipeline load or a duckdb shell may hold the file longer than the writer's
lock timeout. The cycle sampled meanwhile is not dropped: it waits here and goes into the store
with the next cycle that gets the file, in the same transaction and in sampling order. Memory is
bounded by a number of samples; only past that bound are the oldest cycles given up, and counted.
"""

from __future__ import annotations

import datetime as dt
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from jetwatch.health.cluster import Evidence, EvidenceKey


@dataclass
class PendingCycle:
    """One sampling cycle's rows, as the store takes them."""

    at: dt.datetime
    accounts: list[str]
    samples: dict[str, list[Any]]
    configs: list[dict[str, Any]] = field(default_factory=list)
    rejects: list[tuple[str, str, str]] = field(default_factory=list)
    dropped_rejects: dict[str, Any] | None = None  # the minute's count over the reject budget
    kept: list[tuple[str, ...]] = field(default_factory=list)  # streams/consumers keeping their last state
    evidence: dict[EvidenceKey, Evidence] = field(default_factory=dict)  # the cluster cannot serve these
    cluster_findings: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)  # serving, at risk
    arrow: dict[str, Any] | None = None  # the samples as read into Arrow (SampleBatch.arrow)
    # What the store is told with this cycle when it is the newest one written (collectors/runner.py):
    status: dict[str, Any] = field(kw_only=True)  # the collector's status as of this cycle
    server_now: dt.datetime = field(kw_only=True)  # this cycle's time on the server's clock (judging, pins)
    caught_up: bool = False  # advisory capture had caught up at this cycle (pin inference may run)
    began: float = 0.0  # monotonic time the cycle began (its duration, once written)

    @property
    def size(self) -> int:
        return len(next(iter(self.samples.values()), []))


class WriteBacklog:
    """Pending cycles, oldest first, at most `max_samples` samples in all (the newest cycle is
    always kept, however large)."""

    def __init__(self, max_samples: int):
        self.max_samples = max_samples
        self._cycles: deque[PendingCycle] = deque()
        self.dropped_cycles = 0
        self.dropped_samples = 0

    def __len__(self) -> int:
        return len(self._cycles)

    @property
    def samples(self) -> int:
        return sum(c.size for c in self._cycles)

    def add(self, cycle: PendingCycle) -> list[PendingCycle]:
        """Queue `cycle` behind the ones still waiting; returns all of them, to write in order."""
        self._cycles.append(cycle)
        while len(self._cycles) > 1 and self.samples > self.max_samples:
            old = self._cycles.popleft()
            self.dropped_cycles += 1
            self.dropped_samples += old.size
        return list(self._cycles)

    def pending(self) -> list[PendingCycle]:
        """The cycles waiting, oldest first, to write in one transaction."""
        return list(self._cycles)

    def written(self, cycles: list[PendingCycle]) -> None:
        """Forget the cycles a committed transaction stored."""
        for cycle in cycles:
            if self._cycles and self._cycles[0] is cycle:
                self._cycles.popleft()

    def oldest(self) -> dt.datetime | None:
        return self._cycles[0].at if self._cycles else None
