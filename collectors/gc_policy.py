"""When the collector's Python garbage collector runs: between cycles, not in the middle of one.

A cycle at 100,000 consumers allocates millions of short-lived objects (the Python lists of its
samples for the health window; the decoded JSON of every page, where /jsz is read or a cycle's
CONSUMER.LIST pages fall back to being decoded), while the collector holds a few million long-lived ones (its state, the
configs it has seen). With CPython's default thresholds (700, 10, 10) that many allocations set
off full collections in the middle of the cycle, each walking every long-lived object, so a large
cycle spent much of its time collecting (bench.scale runs under this policy, as the collector does).

Nothing is left uncollected: young reference cycles are still collected by young collections,
and a full collection runs between cycles, in the idle time before the next one, at most once
every `full_every` seconds.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

YOUNG = 100_000  # allocations between young collections (CPython's default: 700)
MIDDLE = 50  # young collections per middle one (default: 10)
# Full collections only when asked for (between cycles): CPython runs one by itself after this
# many middle collections, about 5e11 allocations at the thresholds above.
OLD = 100_000
FULL_EVERY = 60.0


class GcPolicy:
    """Applied for a collector's run and restored after it (tests run many collectors in one
    process, some at once: the thresholds found before the first are put back after the last)."""

    _active = 0  # policies applied in this process
    _found: tuple[int, int, int] | None = None  # the thresholds before the first was applied

    def __init__(self, full_every: float = FULL_EVERY, clock: Callable[[], float] = time.monotonic) -> None:
        self.full_every = full_every
        self.clock = clock
        self._applied = False
        self._last_full = clock()
        self.full_collections = 0
        self.full_seconds = 0.0  # time spent in the full collections run between cycles

    def apply(self) -> None:
        if self._applied:
            return
        if GcPolicy._active == 0:
            GcPolicy._found = gc.get_threshold()
        GcPolicy._active += 1
        self._applied = True
        gc.set_threshold(YOUNG, MIDDLE, OLD)
        self._last_full = self.clock()

    def restore(self) -> None:
        if not self._applied:
            return
        self._applied = False
        GcPolicy._active -= 1
        if GcPolicy._active == 0 and GcPolicy._found is not None:
            gc.set_threshold(*GcPolicy._found)

    def between_cycles(self) -> bool:
        """Run the full collection if one is due (call it once a cycle has ended); True if it ran."""
        if not self._applied or self.clock() - self._last_full < self.full_every:
            return False
        began = time.perf_counter()
        gc.collect()
        self.full_seconds += time.perf_counter() - began
        self.full_collections += 1
        self._last_full = self.clock()
        return True
